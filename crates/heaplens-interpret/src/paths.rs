//! From stack ids to call paths of interned functions and call sites: every unique return
//! address is symbolized once, inlined frames are expanded, and runtime frames that say nothing
//! about the program (`_start`, `__libc_start_main`, `start_thread`, allocator shims) are cut.

use rustc_hash::FxHashMap as HashMap;

use crate::load::StackTable;
use crate::progress::Progress;
use crate::suppress::Suppressions;
use crate::symbolize::{Frame, Symbolizer};

/// Index into [`FrameTable::functions`].
pub type FunctionId = u32;
/// Index into [`FrameTable::sites`].
pub type SiteId = u32;

/// Frames between the kernel's entry point and `main`, or at the root of a thread: dropped from
/// the outer end of every path. Names ending in `*` match as prefixes.
pub const RUNTIME_FRAMES: &[&str] = &[
    "_start",
    "__libc_start_main*",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "__clone_internal",
];

/// Allocator shims between the program and `malloc` (the C entry points themselves when one
/// forwards to another, as ld.so's `calloc` does; `operator new` when it was not interposed;
/// Rust's global-allocator glue): dropped from the inner end of a path so that the direct
/// allocator is the code that asked for memory.
pub const ALLOCATOR_FRAMES: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__rtld_malloc",
    "__rtld_calloc",
    "operator new(*",
    "operator new[](*",
    "__rust_alloc*",
    // Newer compilers put their allocator shims in this namespace.
    "__rustc::*",
    "__rust_realloc",
    "__rdl_*",
    "__rg_*",
    "alloc::alloc::alloc",
    "alloc::alloc::alloc_zeroed",
    "alloc::alloc::realloc",
    "alloc::alloc::Global::alloc_impl",
    "alloc::alloc::Global::grow_impl",
    "<alloc::alloc::Global as core::alloc::Allocator>::*",
    "<alloc::alloc::Global>::*",
    "alloc::raw_vec::*",
    "<alloc::raw_vec::*",
    "<std::alloc::System as core::alloc::global::GlobalAlloc>::*",
    "std::sys::alloc::*",
    "std::sys::pal::unix::alloc::*",
    // The heaplens-api crate's reporting wrapper, between the program and its pool's frame.
    "<heaplens_api::Tracked<*",
    "heaplens_api::*",
];

/// Whether paths drop a frame of function `name` wherever it sits at their ends
/// ([`RUNTIME_FRAMES`], [`ALLOCATOR_FRAMES`]): the symbolizer then skips its DWARF.
pub(crate) fn is_cut(name: &str) -> bool {
    matches(name, RUNTIME_FRAMES) || matches(name, ALLOCATOR_FRAMES)
}

fn matches(name: &str, patterns: &[&str]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *p,
    })
}

/// Whether a frame belongs to the standard library, the C library, the runtime or an
/// allocator rather than to the program: views that name "who allocates" skip such frames
/// (`std::vector<T>::push_back` called from `C::add` counts for `C::add`).
pub fn is_library_frame(name: &str, module: Option<&str>) -> bool {
    const MODULES: &[&str] = &[
        "libstdc++",
        "libc++",
        "libc.",
        "libc-",
        "libm.",
        "libgcc_s",
        "ld-linux",
        "libheaplens",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
        "libpthread",
        // The kernel's code in every process (`__vdso_clock_gettime`).
        "linux-vdso",
    ];
    // A template function's full name begins with its return type (`void std::vector<...>::...`),
    // which may hold parentheses of its own (`std::function<void ()> make_cb<int>(int)`): the
    // parameters are the first `(` outside template arguments.
    let head = &name[..cxx_parameters_at(name).unwrap_or(name.len())];
    let mut depth = 0i32;
    let mut qualified = head;
    for (i, c) in head.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ' ' if depth == 0 && !head[..i].ends_with("operator") => qualified = &head[i + 1..],
            _ => {}
        }
    }
    // Runtime functions linked into the program itself: Rust's panic catcher and the C
    // start-up code.
    const LINKED_IN: &[&str] = &["__rust_try", "_start", "__libc_csu_init"];
    LINKED_IN.contains(&name)
        // A PLT entry (`puts@plt`) is the linker's jump to the library, in the program's module.
        || name.ends_with("@plt")
        || in_library_namespace(qualified, !has_cxx_parameters(name))
        || is_library_impl(qualified)
        || module.is_some_and(|m| MODULES.iter().any(|p| m.starts_with(p)))
}

/// The namespaces of the C++ standard library and of Rust's `alloc`, `core` and `std` (and
/// `hashbrown`, the standard `HashMap`'s table). Rust's apply to Rust names only: a C++
/// program may have namespaces `core` and `alloc` of its own, and a demangled C++ function
/// has its parameter list outside any template arguments, which a Rust name never has.
fn in_library_namespace(qualified: &str, rust: bool) -> bool {
    const NAMESPACES: &[&str] = &["std::", "__gnu_cxx::", "__cxxabiv1::", "__gnu_debug::", "__pstl::"];
    const RUST: &[&str] = &["alloc::", "core::", "hashbrown::"];
    // Names the demangler gave up on (some `std::make_shared` instantiations), by their
    // Itanium prefix: `_ZSt` std::, `_ZNSt`/`_ZNKSt` nested in std::, `_ZN9__gnu_cxx`.
    const MANGLED: &[&str] = &["_ZSt", "_ZNSt", "_ZNKSt", "_ZN9__gnu_cxx", "_ZNK9__gnu_cxx"];
    NAMESPACES.iter().chain(MANGLED).any(|n| qualified.starts_with(n))
        || (rust && RUST.iter().any(|n| qualified.starts_with(n)))
}

/// `name` has a `(` outside `<…>`: a C++ function's parameter list.
fn has_cxx_parameters(name: &str) -> bool {
    cxx_parameters_at(name).is_some()
}

/// Where the first `(` outside `<…>` is (the parentheses of `operator()` and the angle
/// brackets of `operator<`, `operator<<`, `operator->` and the like apart).
fn cxx_parameters_at(name: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in name.char_indices() {
        let before = &name[..i];
        let operator = ["operator", "operator<", "operator>", "operator-"].iter().any(|o| before.ends_with(o));
        match c {
            '<' | '>' if operator => {}
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && !name[..i].ends_with("operator") => return Some(i),
            _ => {}
        }
    }
    None
}

/// A Rust method of an impl block, `<Type>::method` or `<Type as Trait>::method`, belongs to the
/// library when its type does (`<alloc::vec::Vec<…> as core::clone::Clone>::clone`), or when
/// the type is a primitive, a slice or a generic parameter and the trait, if any, is the
/// library's (`<[T]>::to_vec`, `<str as alloc::string::ToString>::to_string`, or a trait local to
/// the library's code, `<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec`). An impl of a
/// library trait for the program's own type (`<app::Config as core::clone::Clone>::clone`) is
/// the program's code.
fn is_library_impl(qualified: &str) -> bool {
    let Some(rest) = qualified.strip_prefix('<') else { return false };
    // The self type ends at the ` as ` or the `>` at depth 0 of `rest`.
    let mut depth = 0i32;
    let mut end = rest.len();
    let mut is_trait = false;
    for (i, c) in rest.char_indices() {
        match c {
            '<' | '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            '>' if depth == 0 => {
                end = i;
                break;
            }
            '>' => depth -= 1,
            ' ' if depth == 0 && rest[i..].starts_with(" as ") => {
                end = i;
                is_trait = true;
                break;
            }
            _ => {}
        }
    }
    let self_type = rest[..end].trim_start_matches('&').trim_start_matches("mut ").trim_start_matches("dyn ");
    let library_trait =
        || !is_trait || in_library_namespace(&rest[end + 4..], true) || is_library_impl(&rest[end + 4..]);
    // The program's own trait, even for a library type (`<Vec<String> as app::Summary>`),
    // is the program's code.
    if in_library_namespace(self_type, true) || is_library_impl(self_type) {
        return library_trait();
    }
    let primitive = self_type.starts_with(['[', '(', '*'])
        || matches!(
            self_type,
            "str"
                | "bool"
                | "char"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "u128"
                | "usize"
                | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "i128"
                | "isize"
                | "f32"
                | "f64"
                | "…"
        )
        || (self_type.len() == 1 && self_type.starts_with(|c: char| c.is_ascii_uppercase()));
    // The trait may be local to a library function's impl (`<[_]>::to_vec_in::ConvertVec`).
    primitive && library_trait()
}

/// A function: its display name and module. Functions are told apart by both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Demangled name, or `module+0xOFFSET` / `0xADDR` when symbolization failed.
    pub name: String,
    /// Module basename, when known.
    pub module: Option<String>,
}

/// A call site: a place in a function (`function@file:line`, or `function+0xoffset` without
/// line info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteInfo {
    /// The function holding the site.
    pub function: FunctionId,
    /// Display label.
    pub label: String,
}

/// Interned functions and call sites.
#[derive(Debug, Default)]
pub struct FrameTable {
    /// All functions seen.
    pub functions: Vec<FunctionInfo>,
    /// All call sites seen.
    pub sites: Vec<SiteInfo>,
    fn_map: HashMap<(String, Option<String>), FunctionId>,
    site_map: HashMap<(FunctionId, String), SiteId>,
    naming: Naming,
    /// Per function, the length of its name without the line (`name@file:line` by line).
    base_len: Vec<usize>,
    /// Per function, its code is in a standard library's source ([`is_library_source`]).
    library_source: Vec<bool>,
    /// Per function, the source file of its first site, when known.
    files: Vec<Option<String>>,
}

/// A source file of a standard library: libstdc++'s and libc++'s headers (`/usr/include/c++/12/
/// bits/std_function.h`, `/usr/lib/llvm-16/include/c++/v1/vector`) and Rust's standard
/// library (`/rustc/HASH/library/alloc/src/vec/mod.rs`). Their functions inlined into the
/// program's code keep only a short DWARF name (`_M_create<…>`) that says nothing of its
/// namespace, but their file does.
pub fn is_library_source(file: &str) -> bool {
    file.contains("/include/c++/") || (file.starts_with("/rustc/") && file.contains("/library/"))
}

impl FrameTable {
    /// The function of a site.
    pub fn function_of(&self, site: SiteId) -> FunctionId {
        self.sites[site as usize].function
    }

    /// How many functions there are: their ids are `0..functions_len()`.
    pub fn functions_len(&self) -> usize {
        self.functions.len()
    }

    /// The name of a function.
    pub fn name(&self, f: FunctionId) -> &str {
        &self.functions[f as usize].name
    }

    /// Whether a function's code is a standard library's, by its source file
    /// ([`is_library_source`]): a library frame whatever its name.
    pub fn in_library_source(&self, f: FunctionId) -> bool {
        self.library_source[f as usize]
    }

    /// The source file of a function (of the first of its sites met), when known.
    pub fn file(&self, f: FunctionId) -> Option<&str> {
        self.files[f as usize].as_deref()
    }

    /// The name of a function without the source line that [`Naming::by_line`] adds to it.
    pub fn base_name(&self, f: FunctionId) -> &str {
        &self.functions[f as usize].name[..self.base_len[f as usize]]
    }

    fn intern(&mut self, ret_addr: u64, f: &Frame) -> SiteId {
        let name = match (&f.function, &f.module) {
            (Some(n), _) if self.naming.full_names => n.clone(),
            (Some(n), _) => crate::elide::elide_generics(n).into_owned(),
            (None, Some(m)) => format!("{m}+0x{:x}", f.function_offset()),
            (None, None) => format!("0x{ret_addr:x}"),
        };
        let label = match (&f.file, f.line, f.symbol_offset) {
            (Some(file), Some(line), _) => {
                let base = file.rsplit('/').next().unwrap_or(file);
                format!("{name}@{base}:{line}")
            }
            (_, _, Some(off)) if f.function.is_some() => format!("{name}+0x{off:x}"),
            _ => name.clone(),
        };
        let base_len = name.len();
        let by_line = self.naming.by_line && f.file.is_some() && f.line.is_some();
        let key = (if by_line { label.clone() } else { name }, f.module.clone());
        let function = match self.fn_map.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.functions.len() as FunctionId;
                self.functions.push(FunctionInfo { name: key.0.clone(), module: key.1.clone() });
                self.base_len.push(base_len);
                self.library_source.push(f.file.as_deref().is_some_and(is_library_source));
                self.files.push(f.file.clone());
                self.fn_map.insert(key, id);
                id
            }
        };
        *self.site_map.entry((function, label)).or_insert_with_key(|(function, label)| {
            self.sites.push(SiteInfo { function: *function, label: label.clone() });
            (self.sites.len() - 1) as SiteId
        })
    }
}

/// The call path of each stack, as call sites innermost (the direct allocator) first.
#[derive(Debug, Default)]
pub struct Paths {
    ranges: Vec<(u32, u32)>,
    arena: Vec<SiteId>,
    /// Stacks whose trie walk met an undefined node (their paths lack outer frames).
    pub incomplete: u64,
    /// Per path, the library frame its attribution passed over last ([`NO_SITE`] for none);
    /// empty when paths were not attributed.
    via: Vec<SiteId>,
    /// Per path, the index of its suppression ([`NO_SUPPRESSION`] for none); empty without
    /// suppressions.
    suppressed: Vec<u16>,
}

impl Paths {
    /// The path of the `i`th stack passed to [`resolve`], innermost first.
    pub fn get(&self, i: usize) -> &[SiteId] {
        let (s, n) = self.ranges[i];
        &self.arena[s as usize..(s + n) as usize]
    }

    /// The library function the `i`th path came through to the allocator (`make_widget` via
    /// `std::vector<…>::push_back`): the outermost frame [`Attribution`] cut off its inner end.
    pub fn via(&self, i: usize) -> Option<SiteId> {
        self.via.get(i).copied().filter(|&s| s != NO_SITE)
    }

    /// The suppression (an index into [`Suppressions::list`]) the `i`th path's blocks live at
    /// exit fall under: they are the runtime's by design, or the user said so.
    pub fn suppression(&self, i: usize) -> Option<usize> {
        self.suppressed.get(i).copied().filter(|&s| s != NO_SUPPRESSION).map(usize::from)
    }

    /// Number of paths.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// How functions are named and told apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Naming {
    /// Each source line of a function is a function of its own, named `function@file:line`
    /// (the line of the call the frame was making), so that every table attributes by line;
    /// frames without line information stay whole functions.
    pub by_line: bool,
    /// Keep template and generic arguments; by default they are elided
    /// ([`crate::elide::elide_generics`]), and a function's instantiations are one function.
    pub full_names: bool,
}

/// Which frame of a path is charged with its allocation: the attribution rule of every table
/// that names one function per allocation (the direct allocation table, the call graph's self
/// column, the leak paths).
///
/// By default (`own_code`) a path's inner end is cut past library frames
/// ([`is_library_frame`]: the C and C++ runtimes, Rust's alloc/core/std and hashbrown, the
/// replacement allocators, the monitor) and past frames whose name matches one of `skip` (the
/// user's own wrappers, as pprof's `--drop_frames`), so its first frame is the innermost frame
/// of the program's own code; the library function the program called is kept apart as the
/// path's *via* ([`Paths::via`]). A path of library frames alone keeps its outermost one.
/// [`Attribution::raw`] charges the innermost frame, whatever it is (exports and flame graphs
/// keep full stacks that way).
///
/// The same pass finds, for each path, the suppression its blocks live at exit fall under
/// ([`Paths::suppression`]; see [`crate::suppress`]).
#[derive(Debug, Clone)]
pub struct Attribution {
    /// Pass over library frames at the inner end.
    pub own_code: bool,
    /// Also pass over frames whose function name matches one of these.
    pub skip: Vec<regex::Regex>,
    /// Which paths allocate what is not a leak when live at exit.
    pub suppressions: Suppressions,
}

impl Attribution {
    /// The program's own code, with `skip` patterns added to the library rule, and the
    /// runtime's suppressions.
    pub fn own_code(skip: Vec<regex::Regex>) -> Self {
        Self { own_code: true, skip, suppressions: Suppressions::default() }
    }

    /// The innermost frame, whatever it is; no suppression.
    pub fn raw() -> Self {
        Self { own_code: false, skip: Vec::new(), suppressions: Suppressions::none() }
    }
}

/// Symbolizes the stacks `ids` (trie node ids) and returns their paths in the same order,
/// with the default [`Naming`].
pub fn resolve(stacks: &StackTable, ids: &[u32], sym: &mut dyn Symbolizer, progress: bool) -> (FrameTable, Paths) {
    resolve_named(stacks, ids, sym, progress, Naming::default())
}

/// [`resolve`] with the given [`Naming`].
pub fn resolve_named(
    stacks: &StackTable,
    ids: &[u32],
    sym: &mut dyn Symbolizer,
    progress: bool,
    naming: Naming,
) -> (FrameTable, Paths) {
    resolve_paths(stacks, ids, sym, progress, naming, Inner::Allocation, &Attribution::raw())
}

/// [`resolve_named`] with the paths' inner ends cut by `attribution`; [`Paths::via`] gives
/// what was cut of each.
pub fn resolve_attributed(
    stacks: &StackTable,
    ids: &[u32],
    sym: &mut dyn Symbolizer,
    progress: bool,
    naming: Naming,
    attribution: &Attribution,
) -> (FrameTable, Paths) {
    resolve_paths(stacks, ids, sym, progress, naming, Inner::Allocation, attribution)
}

/// [`resolve_named`] for the stacks of CPU samples ([`crate::cpu`]): the innermost frame is
/// where the time went, so allocator frames there stay (a sample in `malloc` is `malloc`'s
/// self time); the outer end is cut as for allocations.
pub fn resolve_samples(
    stacks: &StackTable,
    ids: &[u32],
    sym: &mut dyn Symbolizer,
    progress: bool,
    naming: Naming,
) -> (FrameTable, Paths) {
    resolve_paths(stacks, ids, sym, progress, naming, Inner::Sample, &Attribution::raw())
}

/// What a path's innermost end is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inner {
    /// The allocator's entry: its shims and the monitor's frames are cut.
    Allocation,
    /// An interrupted instruction: kept as it is.
    Sample,
}

fn resolve_paths(
    stacks: &StackTable,
    ids: &[u32],
    sym: &mut dyn Symbolizer,
    progress: bool,
    naming: Naming,
    inner: Inner,
    attribution: &Attribution,
) -> (FrameTable, Paths) {
    // 1. Unique return addresses, visiting each trie node about once (stacks share
    //    prefixes). A walk reads at most `depth` frames, so a node first met at depth d0 had
    //    `depth` - d0 of its outer frames read: a walk meeting it at depth d >= d0 needs no
    //    more, one meeting it nearer its inner end goes on.
    let depth = crate::load::depth_for(ids.len());
    let mut first_depth = vec![u32::MAX; stacks.len()];
    let mut addrs: Vec<u64> = Vec::new();
    for &id in ids {
        for (d, (node, addr)) in stacks.walk_within(id, depth).enumerate() {
            let seen = &mut first_depth[node as usize];
            if *seen <= d as u32 {
                break;
            }
            if *seen == u32::MAX {
                addrs.push(addr);
            }
            *seen = d as u32;
        }
    }
    drop(first_depth);
    addrs.sort_unstable();
    addrs.dedup();

    // 2. Symbolize each address once; in address order, so each module's debug info is read in
    //    one sweep.
    let mut table = FrameTable { naming, ..FrameTable::default() };
    let mut addr_sites: HashMap<u64, (u32, u32)> = HashMap::with_capacity_and_hasher(addrs.len(), Default::default());
    let mut site_arena: Vec<SiteId> = Vec::new();
    let mut frames = Vec::new();
    let bar = Progress::items(progress && addrs.len() > 1000, addrs.len() as u64, "symbolizing");
    for &a in &addrs {
        frames.clear();
        sym.symbolize(a, &mut frames);
        if frames.is_empty() {
            frames.push(Frame::default());
        }
        let start = site_arena.len() as u32;
        for f in &frames {
            let s = table.intern(a, f);
            site_arena.push(s);
        }
        addr_sites.insert(a, (start, frames.len() as u32));
        bar.inc(1);
    }
    bar.finish();

    // 3. Paths, trimmed.
    let mut paths = Paths::default();
    // Per function, what attribution and suppression make of it (decided once: regexes cost).
    let mut classes: Vec<Option<FnClass>> = vec![None; table.functions.len()];
    let mut buf: Vec<SiteId> = Vec::new();
    for &id in ids {
        buf.clear();
        for (_, addr) in stacks.walk_within(id, depth) {
            let (s, n) = addr_sites[&addr];
            buf.extend_from_slice(&site_arena[s as usize..(s + n) as usize]);
        }
        if !stacks.is_complete_within(id, depth) {
            paths.incomplete += 1;
        }
        if inner == Inner::Sample {
            // A sample's stack can pass through the monitor mid-way (a hook calling the C
            // library's allocator on the program's behalf): never the program's frames.
            buf.retain(|&s| !is_monitor(&table, s));
        }
        let (pool, kept) = trim(&table, &buf, inner);
        let mut class = |s: SiteId| classify(&table, s, attribution, &mut classes);
        if !attribution.suppressions.is_empty() {
            paths.suppressed.push(suppression(kept, &mut class).map_or(NO_SUPPRESSION, |i| i as u16));
        }
        let (via, kept) = attribute(kept, attribution, &mut class);
        let start = paths.arena.len() as u32;
        paths.arena.extend(pool);
        paths.arena.extend_from_slice(kept);
        paths.ranges.push((start, (pool.is_some() as usize + kept.len()) as u32));
        if attribution.own_code || !attribution.skip.is_empty() {
            paths.via.push(via.unwrap_or(NO_SITE));
        }
    }
    (table, paths)
}

/// Whether a call site is in the monitor library (`libheaplens_preload*.so`).
fn is_monitor(t: &FrameTable, s: SiteId) -> bool {
    t.functions[t.function_of(s) as usize].module.as_deref().is_some_and(|m| m.starts_with("libheaplens_preload"))
}

/// No call site: a path charged to its innermost frame has no via.
const NO_SITE: SiteId = SiteId::MAX;
/// No suppression for a path.
const NO_SUPPRESSION: u16 = u16::MAX;

/// What attribution and suppression make of a function.
#[derive(Clone, Copy)]
struct FnClass {
    /// Attribution passes over it.
    passed: bool,
    /// It is the runtime's or an allocator's ([`is_library_frame`], [`ALLOCATOR_FRAMES`]).
    library: bool,
    /// The runtime suppression naming it.
    runtime: Option<usize>,
    /// The user suppression matching it.
    user: Option<usize>,
}

fn classify(t: &FrameTable, s: SiteId, a: &Attribution, cache: &mut [Option<FnClass>]) -> FnClass {
    let f = t.function_of(s);
    *cache[f as usize].get_or_insert_with(|| {
        let (name, module) = (t.base_name(f), t.functions[f as usize].module.as_deref());
        let library = is_library_frame(name, module) || t.in_library_source(f) || matches(name, ALLOCATOR_FRAMES);
        FnClass {
            passed: (a.own_code && library) || skipped(&a.skip, name),
            library,
            runtime: if library { a.suppressions.runtime_match(name) } else { None },
            user: a.suppressions.user_match(name, module, t.file(f)),
        }
    })
}

/// Whether one of the `--skip` patterns matches `name`, or `name` without its C++ parameter
/// list: `^xmalloc$` skips `xmalloc(unsigned long)` as it skips C's `xmalloc`.
fn skipped(skip: &[regex::Regex], name: &str) -> bool {
    let bare = cxx_parameters_at(name).map(|at| &name[..at]);
    skip.iter().any(|r| r.is_match(name) || bare.is_some_and(|b| r.is_match(b)))
}

/// The suppression of a path: a runtime one naming a frame of its library part (the frames
/// inner to the program's first), else the first user one matching any frame.
fn suppression(path: &[SiteId], class: &mut impl FnMut(SiteId) -> FnClass) -> Option<usize> {
    let mut runtime = None;
    for &s in path {
        let c = class(s);
        if !c.library {
            break;
        }
        runtime = runtime.or(c.runtime);
    }
    runtime.or_else(|| path.iter().find_map(|&s| class(s).user))
}

/// Cuts the library frames (and the user's skipped ones) off the inner end of `path` under
/// the attribution `class` gives; returns the outermost frame cut (the library function the
/// program called) and the rest. A path of nothing but such frames keeps its outermost one.
fn attribute<'a>(
    path: &'a [SiteId],
    attribution: &Attribution,
    class: &mut impl FnMut(SiteId) -> FnClass,
) -> (Option<SiteId>, &'a [SiteId]) {
    if !attribution.own_code && attribution.skip.is_empty() {
        return (None, path);
    }
    let mut start = 0;
    while path.len() - start > 1 && class(path[start]).passed {
        start += 1;
    }
    (start.checked_sub(1).map(|i| path[i]), &path[start..])
}

/// Cuts a path (innermost first) to the program's own frames: everything outside `main` (when
/// `main` is present), runtime roots, and allocator shims and monitor frames at the inner end,
/// or just above a pool's frame (which stays, returned apart: see `include/heaplens.h`). The
/// monitor's frames at the outer end (the start of a thread it samples) go too.
fn trim<'a>(t: &FrameTable, path: &'a [SiteId], inner: Inner) -> (Option<SiteId>, &'a [SiteId]) {
    let func = |s: SiteId| &t.functions[t.function_of(s) as usize];
    let name = |s: SiteId| t.base_name(t.function_of(s));
    let monitor = |s: SiteId| is_monitor(t, s);
    let is_pool =
        |s: SiteId| func(s).module.as_deref().is_some_and(|m| m.starts_with(heaplens_trace::event::POOL_MODULE_PREFIX));
    let (pool, path) = match path.split_first() {
        Some((&p, rest)) if is_pool(p) => (Some(p), rest),
        _ => (None, path),
    };
    let mut end = path.len();
    if let Some(i) = path.iter().rposition(|&s| name(s) == "main") {
        end = i + 1;
    }
    while end > 0 && (matches(name(path[end - 1]), RUNTIME_FRAMES) || monitor(path[end - 1])) {
        end -= 1;
    }
    // A thread the standard library started (std::thread's trampoline in libstdc++, often
    // unnamed) is the runtime's root too, where the program's own code lies inside it.
    let library = |s: SiteId| is_library_frame(name(s), func(s).module.as_deref());
    if end > 1 && library(path[end - 1]) && path[..end - 1].iter().any(|&s| !library(s) && !monitor(s)) {
        while end > 1 && library(path[end - 1]) {
            end -= 1;
        }
    }
    // Rust's start-up (and a spawned thread's) calls the program's `main` (or closure) through
    // `__rust_begin_short_backtrace` and `FnOnce::call_once`: outside the program's code.
    if let Some(i) = path[..end].iter().position(|&s| name(s).ends_with("__rust_begin_short_backtrace")) {
        let call_once = |s: SiteId| name(s).contains("FnOnce") && name(s).ends_with("call_once");
        let mut cut = i;
        while cut > 1 && call_once(path[cut - 1]) {
            cut -= 1;
        }
        if cut > 0 {
            end = cut;
        }
    }
    let mut start = 0;
    while inner == Inner::Allocation && end - start > 1 {
        if !(monitor(path[start]) || matches(name(path[start]), ALLOCATOR_FRAMES)) {
            break;
        }
        start += 1;
    }
    (pool, &path[start..end])
}

#[cfg(test)]
mod tests {
    #[test]
    fn library_frames() {
        use super::is_library_frame;
        assert!(is_library_frame(
            "void std::vector<long, std::allocator<long> >::_M_realloc_insert<long>(long&&)",
            None
        ));
        assert!(is_library_frame("std::vector<…>::_M_realloc_insert<…>(long&&)", None));
        assert!(is_library_frame("_IO_file_doallocate", Some("libc.so.6")));
        assert!(is_library_frame("(anonymous namespace)::pool::pool()", Some("libstdc++.so.6")));
        assert!(!is_library_frame("Registry::grow()", Some("cxx_scenarios")));
        assert!(is_library_frame("clock_gettime@plt", Some("app")));
        assert!(is_library_frame("__vdso_clock_gettime", Some("linux-vdso.so.1")));
        // Rust: the standard library's growth paths, its impls and blanket impls.
        for lib in [
            "alloc::vec::Vec<…>::reserve",
            "hashbrown::raw::alloc::inner::do_alloc",
            "<alloc::vec::Vec<…> as core::clone::Clone>::clone",
            "<[T]>::to_vec",
            "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<…>",
            "<str as alloc::string::ToString>::to_string",
            "<T as alloc::string::ToString>::to_string",
            "std::collections::hash::map::HashMap<…>::insert",
            "core::ops::function::FnOnce::call_once",
            "__rust_try",
            "std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)",
            "_ZSt11make_sharedISt5arrayIcLm100EEJEESt10shared_ptrINSt9enable_ifIXntsrSt8is_arrayIT_E5valueES5_E4typeEEDpOT0_",
            "<<alloc::boxed::Box<…> as core::convert::From<…>>::from as core::ops::function::FnOnce<…>>::call_once",
        ] {
            assert!(is_library_frame(lib, Some("app")), "{lib}");
        }
        for own in [
            "app::build_index",
            "<app::Config as core::clone::Clone>::clone",
            "<app::Cache<…>>::fill",
            "main",
            // The program's trait for a library type.
            "<alloc::vec::Vec<…> as app::Summary>::summarize",
            // C++ namespaces named like Rust's crates.
            "core::Engine::load()",
            "alloc::grab(unsigned long)",
            "void core::fill<int>(std::vector<int, std::allocator<int> >&)",
            // A return type with parentheses of its own.
            "std::function<void ()> make_cb<int>(int)",
            "main::{lambda(int)#1}::operator()(int) const",
            "Key::operator<(Key const&) const",
            "Node<int>::operator->() const",
        ] {
            assert!(!is_library_frame(own, Some("app")), "{own}");
        }
    }

    #[test]
    fn attribution_passes_over_library_frames() {
        let mut st = StackTable::default();
        // main(0x30) > fill(0x40) > std::vector<…>::push_back (0x50) > _M_realloc_insert (0x60) > operator new (0x70)
        for (id, addr) in [(1u32, 0x30u64), (2, 0x40), (3, 0x50), (4, 0x60), (5, 0x70)] {
            st.insert(StackNode { id, parent: id - 1, addr });
        }
        let mut sym = MapSymbolizer::new();
        sym.add(0x30, "main").add(0x40, "fill").add(0x50, "std::vector<…>::push_back(long&&)");
        sym.add(0x60, "void std::vector<…>::_M_realloc_insert<…>(long&&)").add(0x70, "operator new(unsigned long)");
        let name = |t: &FrameTable, s: SiteId| t.name(t.function_of(s)).to_string();
        let own = Attribution::own_code(Vec::new());
        let (t, p) = resolve_attributed(&st, &[5, 3], &mut sym, false, Naming::default(), &own);
        assert_eq!(p.get(0).iter().map(|&s| name(&t, s)).collect::<Vec<_>>(), ["fill", "main"]);
        assert_eq!(p.via(0).map(|s| name(&t, s)).as_deref(), Some("std::vector<…>::push_back(long&&)"));
        assert_eq!(p.get(1).iter().map(|&s| name(&t, s)).collect::<Vec<_>>(), ["fill", "main"]);
        let skip = Attribution::own_code(vec![regex::Regex::new("^fill$").unwrap()]);
        let (t, p) = resolve_attributed(&st, &[5], &mut sym, false, Naming::default(), &skip);
        assert_eq!(p.get(0).iter().map(|&s| name(&t, s)).collect::<Vec<_>>(), ["main"]);
        assert_eq!(p.via(0).map(|s| name(&t, s)).as_deref(), Some("fill"));
        let (t, p) = resolve_attributed(&st, &[5], &mut sym, false, Naming::default(), &Attribution::raw());
        assert_eq!(
            p.get(0).len(),
            4,
            "raw keeps the library frames: {:?}",
            p.get(0).iter().map(|&s| name(&t, s)).collect::<Vec<_>>()
        );
        assert_eq!(p.via(0), None);
    }

    #[test]
    fn stacks_deeper_than_the_views_read_are_cut_and_incomplete() {
        use crate::load::MAX_DEPTH;
        // One chain of 3000 frames; allocations at its end and 500 frames out, so that the
        // two walks meet the same nodes at different depths.
        let mut st = StackTable::default();
        let mut sym = MapSymbolizer::new();
        for id in 1..=3000u32 {
            st.insert(StackNode { id, parent: id - 1, addr: 0x1000 + u64::from(id) });
            sym.add(0x1000 + u64::from(id), &format!("f{id}"));
        }
        assert_eq!(st.walk(3000).count(), MAX_DEPTH);
        assert!(!st.is_complete(3000) && st.is_complete(MAX_DEPTH as u32) && !st.is_complete(MAX_DEPTH as u32 + 1));
        let (t, p) = resolve_attributed(&st, &[3000, 2500], &mut sym, false, Naming::default(), &Attribution::raw());
        let name = |s: SiteId| t.name(t.function_of(s)).to_string();
        assert_eq!(p.get(0).len(), MAX_DEPTH);
        assert_eq!(
            (name(p.get(1)[0]), name(p.get(1)[MAX_DEPTH - 1])),
            ("f2500".into(), format!("f{}", 2501 - MAX_DEPTH))
        );
        assert_eq!(p.incomplete, 2);
    }

    use super::*;
    use crate::symbolize::MapSymbolizer;
    use heaplens_trace::StackNode;

    #[test]
    fn trims_runtime_and_expands_inlines() {
        let mut st = StackTable::default();
        // root: _start(0x10) > __libc_start_main_impl(0x20) > main(0x30) > f+inlined g (0x40) > __rdl_alloc(0x50)
        for (id, addr) in [(1u32, 0x10u64), (2, 0x20), (3, 0x30), (4, 0x40), (5, 0x50)] {
            st.insert(StackNode { id, parent: id - 1, addr });
        }
        let mut sym = MapSymbolizer::new();
        sym.add(0x10, "_start").add(0x20, "__libc_start_main_impl").add(0x30, "main").add(0x50, "__rdl_alloc");
        sym.add_frames(
            0x40,
            vec![
                Frame { function: Some("g".into()), file: Some("/src/a.c".into()), line: Some(7), ..Frame::default() },
                Frame { function: Some("f".into()), file: Some("/src/a.c".into()), line: Some(12), ..Frame::default() },
            ],
        );
        let (t, p) = resolve(&st, &[5, 3], &mut sym, false);
        let names: Vec<&str> = p.get(0).iter().map(|&s| t.name(t.function_of(s))).collect();
        assert_eq!(names, ["g", "f", "main"]);
        let labels: Vec<&str> = p.get(0).iter().map(|&s| t.sites[s as usize].label.as_str()).collect();
        assert_eq!(labels, ["g@a.c:7", "f@a.c:12", "main"]);
        assert_eq!(p.get(1).len(), 1);
        assert_eq!(p.incomplete, 0);
    }

    #[test]
    fn unknown_frames_and_undefined_nodes() {
        let mut st = StackTable::default();
        st.insert(StackNode { id: 2, parent: 1, addr: 0xabc }); // node 1 never defined
        let (t, p) = resolve(&st, &[2], &mut MapSymbolizer::new(), false);
        assert_eq!(t.name(t.function_of(p.get(0)[0])), "0xabc");
        assert_eq!(p.incomplete, 1);
    }
}
