//! Quota and rate-limit policy: quota types, request-unit costing, the keyed limiter and the errors they raise. Pure, no I/O.
