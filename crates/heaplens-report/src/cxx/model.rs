//! The C++ tables as data (the `cxx` member of the report's JSON). Counts are allocations,
//! bytes are requested bytes, percentages are 0..=100 of all allocations. "First level" is the
//! outermost class member function on an allocation's call path, "lowest level" the innermost
//! one, where the memory is actually allocated (mtrace++, section 3.1).

use std::collections::BTreeMap;

use serde::Serialize;

use super::scenario::Scenario;

/// mtrace++'s tables.
#[derive(Debug, Clone, Serialize)]
pub struct CxxTables {
    /// Allocations in all.
    pub allocations: u64,
    /// Bytes allocated in all.
    pub bytes: u64,
    /// Allocations made with a class member function on the call path.
    pub in_classes: u64,
    /// Analysis by invocation scenario: the seven scenarios in mtrace++'s order.
    pub scenarios: Vec<ScenarioRow>,
    /// Per class (by the lowest level), most bytes first.
    pub classes: Vec<ClassRow>,
    /// Object distribution: per requested size, by lowest-level scenario, smallest first.
    pub sizes: Vec<SizeRow>,
    /// Dynamic allocation call tree: per path of member functions, entry point and size, most
    /// bytes first.
    pub paths: Vec<PathRow>,
    /// Depth of allocation tree, overall and per class (by the lowest level).
    pub depth: DepthTable,
    /// New versus malloc: allocations per entry point, per class (by the lowest level; `None`
    /// for allocations outside classes), most bytes first.
    pub entry_points: Vec<EntryRow>,
}

/// Allocations and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CountBytes {
    /// Allocations.
    pub count: u64,
    /// Requested bytes.
    pub bytes: u64,
}

/// One scenario of the analysis by invocation scenario.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRow {
    /// The scenario.
    pub scenario: Scenario,
    /// Attributed to the first level.
    pub first: CountBytes,
    /// `first.count` as a percentage of all allocations.
    pub first_pct: f64,
    /// Attributed to the lowest level.
    pub lowest: CountBytes,
    /// `lowest.count` as a percentage of all allocations.
    pub lowest_pct: f64,
}

/// One class: what its member functions allocate as the lowest level.
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    /// Qualified class name.
    pub class: String,
    /// In all.
    pub total: CountBytes,
    /// By scenario (only those with allocations).
    pub by_scenario: BTreeMap<Scenario, CountBytes>,
}

/// One requested size of the object distribution table.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    /// Requested bytes.
    pub size: u64,
    /// Allocations of this size in all.
    pub total: CountBytes,
    /// By lowest-level scenario (only those with allocations).
    pub by_scenario: BTreeMap<Scenario, CountBytes>,
}

/// One row of the dynamic allocation call tree.
#[derive(Debug, Clone, Serialize)]
pub struct PathRow {
    /// Member functions (`Class::name`), outermost first; empty outside classes.
    pub path: Vec<String>,
    /// Entry point: `new`, `new[]`, `malloc`, `calloc`, `realloc`, or an aligned C function.
    pub entry: String,
    /// Requested bytes.
    pub size: u64,
    /// Allocations.
    pub count: u64,
    /// Bytes (`count * size`).
    pub bytes: u64,
}

/// Depth of allocation tree: the number of member functions on allocations' paths.
#[derive(Debug, Clone, Serialize)]
pub struct DepthTable {
    /// All allocations.
    pub overall: DepthRow,
    /// Per class, by the lowest level, deepest first.
    pub classes: Vec<DepthRow>,
}

/// The depths of one class's allocations (or of all).
#[derive(Debug, Clone, Serialize)]
pub struct DepthRow {
    /// The class (`None` for the overall row).
    pub class: Option<String>,
    /// The largest depth.
    pub max: usize,
    /// Allocations by depth: `allocations[d]` were made with `d` member functions on their
    /// path (`allocations[0]`: outside classes).
    pub allocations: Vec<u64>,
}

/// One class's allocations per entry point.
#[derive(Debug, Clone, Serialize)]
pub struct EntryRow {
    /// The class, `None` for allocations outside classes.
    pub class: Option<String>,
    /// In all.
    pub total: CountBytes,
    /// Per entry point.
    pub by_entry: BTreeMap<String, CountBytes>,
}
