//! Usage metering: collects ndbinfo samples from data nodes, rolls them up and answers usage queries.
