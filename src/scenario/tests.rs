//! Scenario tests: every example parses, and each class of mistake names its file:line:key.

use super::*;

#[test]
fn default_parses() {
    let p = default_plan();
    assert_eq!(p.name, "default");
    assert_eq!(p.population.users, 1000);
}
