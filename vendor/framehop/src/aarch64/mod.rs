mod arch;
mod cache;
mod dwarf;
mod instruction_analysis;
#[cfg(feature = "macho")]
mod macho;
#[cfg(feature = "pe")]
mod pe;
mod unwind_rule;
mod unwinder;
mod unwindregs;

pub use arch::*;
pub use cache::*;
pub use unwind_rule::*;
pub use unwinder::*;
pub use unwindregs::*;
