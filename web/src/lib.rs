//! The web console: pages, assets and the routes the control plane mounts at `/`.
