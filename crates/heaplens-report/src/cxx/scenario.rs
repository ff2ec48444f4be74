//! mtrace++'s seven invocation scenarios (its section 3.1), derived from a call path instead of
//! source marks: the class member functions on the path, once the frames of the standard
//! library, the C library and the allocator are skipped, are the levels of the allocation.

use serde::Serialize;

use super::names::{Member, Role};

/// An invocation scenario: the role of the member function an allocation is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// In a constructor.
    Constructor,
    /// In a copy (or move) constructor.
    CopyConstructor,
    /// In an assignment operator.
    Assignment,
    /// In a type conversion operator.
    Conversion,
    /// In a constructor of a class whose object is a member (or base) of another class, run by
    /// that class's constructor.
    MemberData,
    /// In another member function.
    MemberFunction,
    /// Outside any class member function.
    Others,
}

impl Scenario {
    /// All seven, in mtrace++'s order.
    pub const ALL: [Scenario; 7] = [
        Scenario::Constructor,
        Scenario::CopyConstructor,
        Scenario::Assignment,
        Scenario::Conversion,
        Scenario::MemberData,
        Scenario::MemberFunction,
        Scenario::Others,
    ];

    /// The label tables print.
    pub fn label(self) -> &'static str {
        match self {
            Scenario::Constructor => "constructor",
            Scenario::CopyConstructor => "copy constructor",
            Scenario::Assignment => "operator=",
            Scenario::Conversion => "type conversion",
            Scenario::MemberData => "member data",
            Scenario::MemberFunction => "member function",
            Scenario::Others => "others",
        }
    }

    /// Its index in [`Scenario::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    fn of(role: Role) -> Scenario {
        match role {
            Role::Constructor => Scenario::Constructor,
            Role::CopyConstructor => Scenario::CopyConstructor,
            Role::Assignment => Scenario::Assignment,
            Role::Conversion => Scenario::Conversion,
            Role::MemberFunction => Scenario::MemberFunction,
        }
    }
}

/// How one call path allocates, in mtrace++'s terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels {
    /// The scenario of the outermost member function (`Others` with none).
    pub first: Scenario,
    /// The scenario of the innermost member function, where the memory is actually allocated.
    pub lowest: Scenario,
    /// The member functions on the path, outermost first: the allocation path of mtrace++'s
    /// DACT, whose length is the depth of its DAT.
    pub chain: Vec<Member>,
}

impl Levels {
    /// The class of the innermost member function, where the memory is allocated.
    pub fn class(&self) -> Option<&str> {
        self.chain.last().map(|m| m.class.as_str())
    }
}

/// The levels of a call path given innermost first as the member function each frame is
/// (`None` for free functions and for skipped frames). Consecutive frames of one member
/// function are one level.
pub fn levels(path_innermost_first: &[Option<&Member>]) -> Levels {
    let mut chain: Vec<Member> = path_innermost_first.iter().rev().flatten().map(|m| (*m).clone()).collect();
    // A function and its compiler-split part (`f [clone .part.0]`) are one level; so are the
    // frames of a direct recursion.
    chain.dedup();
    let (first, lowest) = match chain.as_slice() {
        [] => (Scenario::Others, Scenario::Others),
        [only] => (Scenario::of(only.role), Scenario::of(only.role)),
        [outer, .., inner] => {
            let enclosing = &chain[chain.len() - 2];
            let constructs = |m: &Member| matches!(m.role, Role::Constructor | Role::CopyConstructor);
            let lowest = if constructs(inner) && constructs(enclosing) && inner.class != enclosing.class {
                Scenario::MemberData
            } else {
                Scenario::of(inner.role)
            };
            (Scenario::of(outer.role), lowest)
        }
    };
    Levels { first, lowest, chain }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(class: &str, name: &str, role: Role) -> Member {
        Member { class: class.into(), name: name.into(), role }
    }

    #[test]
    fn first_and_lowest_levels() {
        let owner = m("Owner", "Owner", Role::Constructor);
        let buffer = m("Buffer", "Buffer", Role::Constructor);
        let l = levels(&[Some(&buffer), None, Some(&owner), None]);
        assert_eq!((l.first, l.lowest), (Scenario::Constructor, Scenario::MemberData));
        assert_eq!(l.class(), Some("Buffer"));
        assert_eq!(l.chain.len(), 2);

        let run = m("Outer", "run", Role::MemberFunction);
        let conv = m("Buffer", "operator char*", Role::Conversion);
        let l = levels(&[Some(&conv), Some(&run)]);
        assert_eq!((l.first, l.lowest), (Scenario::MemberFunction, Scenario::Conversion));

        // A constructor calling another constructor of its own class (delegation) is no member.
        let copy = m("Buffer", "Buffer", Role::CopyConstructor);
        let l = levels(&[Some(&buffer), Some(&copy)]);
        assert_eq!(l.lowest, Scenario::Constructor);
        // A function and its split-off part are one level.
        let l = levels(&[Some(&conv), Some(&conv), Some(&run)]);
        assert_eq!(l.chain.len(), 2);

        let l = levels(&[None, None]);
        assert_eq!((l.first, l.lowest, l.class()), (Scenario::Others, Scenario::Others, None));
    }
}
