//! mtrace++'s tables for C++ programs (issue 18), without touching their source: mtrace++
//! (Lee, Chang & Hasan) put begin and end marks in every member function; heaplens reads the
//! same facts off each allocation's call stack and the program's debug information.
//!
//! - [`counts`]: a view over the replay counting allocations by stack, entry point and size;
//! - [`names`]: the class and role (constructor, copy constructor, `operator=`, conversion,
//!   other member) a demangled function name gives;
//! - [`scenario`]: the seven invocation scenarios and the first and lowest level of a path;
//! - [`tables`] builds [`model::CxxTables`]; [`text`] renders it.

pub mod counts;
pub mod model;
pub mod names;
pub mod scenario;
pub mod tables;
pub mod text;
