//! Where the cluster's databases are served, as the control plane tells
//! every node (`PUT /internal/v1/directory`): a node answers a client of a
//! database another node group serves with that group's addresses (REST
//! 421, Redis `-WRONGGROUP`) rather than as if the database did not exist.
//! Kept in memory only: the control plane tells a node again when it
//! starts.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use shoal_wire::api::Endpoint;
use shoal_wire::internal::Directory;

use super::Cluster;

/// Most databases and node groups a directory names.
const MAX_ENTRIES: usize = 1_000_000;

/// The directory, and the same indexed for a lookup by name.
#[derive(Debug, Default)]
pub(super) struct Known(ArcSwap<Index>);

#[derive(Debug, Default)]
struct Index {
    directory: Directory,
    groups: HashMap<u32, Vec<Endpoint>>,
    /// By name in lower case: names are unique whatever their case.
    databases: HashMap<String, u32>,
}

/// Another node group serving a database.
#[derive(Debug, Clone)]
pub(crate) struct ServedElsewhere {
    pub(crate) node_group: u32,
    pub(crate) nodes: Vec<Endpoint>,
}

impl ServedElsewhere {
    /// Its nodes' REST URLs, as a message names them.
    pub(crate) fn rest_urls(&self) -> String {
        let urls: Vec<&str> = self.nodes.iter().map(|n| n.rest_url.as_str()).collect();
        urls.join(", ")
    }

    /// Its nodes' Redis addresses, as a message names them.
    pub(crate) fn resp_addrs(&self) -> String {
        let addrs: Vec<&str> = self.nodes.iter().map(|n| n.resp_addr.as_str()).collect();
        addrs.join(" ")
    }
}

impl Cluster {
    /// Takes `directory` as where the cluster's databases are served.
    pub(crate) fn set_directory(&self, directory: Directory) -> Result<(), String> {
        if directory.databases.len() + directory.groups.len() > MAX_ENTRIES {
            return Err(format!("a directory names at most {MAX_ENTRIES} entries"));
        }
        let groups = (directory.groups.iter())
            .map(|g| (g.node_group, g.nodes.clone()))
            .collect();
        let databases = (directory.databases.iter())
            .map(|d| (d.name.to_lowercase(), d.node_group))
            .collect();
        self.inner.directory.0.store(Arc::new(Index {
            directory,
            groups,
            databases,
        }));
        Ok(())
    }

    /// The directory this node was last told.
    pub(crate) fn directory(&self) -> Directory {
        self.inner.directory.0.load().directory.clone()
    }

    /// The other node group that serves database `name`, if this node does
    /// not hold it and knows which does.
    pub(crate) fn served_elsewhere(&self, name: &str) -> Option<ServedElsewhere> {
        if self.inner.engine.database(name).is_ok() {
            return None;
        }
        let index = self.inner.directory.0.load();
        let &node_group = index.databases.get(&name.to_lowercase())?;
        let mine = self.group().map(|g| g.node_group);
        if mine == Some(node_group) {
            return None;
        }
        let nodes = index.groups.get(&node_group)?.clone();
        Some(ServedElsewhere { node_group, nodes })
    }
}
