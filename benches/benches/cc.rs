//! Placeholder: filled in by its issue.
fn main() {}
