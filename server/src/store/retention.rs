//! Retention policies (being written).
