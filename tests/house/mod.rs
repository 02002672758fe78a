//! The house's shape, checked on the source.

mod shape;
