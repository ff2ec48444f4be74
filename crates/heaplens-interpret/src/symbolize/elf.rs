//! The real symbolizer: DWARF line tables and inlined-function info through `addr2line`, the
//! ELF symbol table as fallback, separate debug files found by build id or `.gnu_debuglink`.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use addr2line::Loader;
use heaplens_trace::ModuleRecord;
use object::Object;

use super::bounds::FunctionBounds;
use super::dwarf::{push_all, DebugDwarf};
use super::mapped::Mapped;
use super::symtab::SymbolTable;
use super::{Frame, Symbolizer};

/// Where global debug files live (Debian's `-dbg`/`-dbgsym` packages install here).
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// One module of the process, opened on first use.
struct Module {
    /// The path for people (not UTF-8 bytes replaced).
    path: String,
    /// The path to open, its bytes as recorded.
    file: PathBuf,
    basename: String,
    base: u64,
    build_id: Vec<u8>,
    /// The opened files, or why they could not be used.
    files: OnceCell<Opened>,
}

/// Module files opened so far, by path and build id: several symbolizers built one after
/// another (as module records arrive) open each file once.
#[derive(Default)]
pub struct FileCache {
    opened: RefCell<HashMap<(PathBuf, Vec<u8>), Opened>>,
    /// The traced process's executable, opened while it runs (`/proc/PID/exe`), and the path
    /// it had then: a file deleted since (an upgrade replacing a server's binary; the kernel
    /// then names it `PATH (deleted)`) is still read through the descriptor.
    live_exe: RefCell<Option<(std::fs::File, PathBuf)>>,
    /// This process's vDSO: its build id and symbols (see `vdso.rs`), read on first use.
    vdso: OnceCell<Option<(Vec<u8>, SymbolTable)>>,
}

/// A module's files, or why they could not be used.
type Opened = Rc<Result<Files, String>>;

impl FileCache {
    /// Files are of process `pid`, which is running: its executable is opened now, so that it
    /// is read even once deleted (or the process gone).
    pub fn set_live_process(&self, pid: u32) {
        let exe = format!("/proc/{pid}/exe");
        let (Ok(file), Ok(path)) = (std::fs::File::open(&exe), std::fs::read_link(&exe)) else { return };
        let path = match path.as_os_str().as_encoded_bytes().strip_suffix(b" (deleted)") {
            // SAFETY: a prefix of an OsStr's bytes ending before an ASCII space.
            Some(p) => PathBuf::from(unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(p) }),
            None => path,
        };
        *self.live_exe.borrow_mut() = Some((file, path));
    }

    /// The symbols of the vDSO whose build id is `build_id`, when it is this kernel's.
    fn vdso(&self, build_id: &[u8]) -> Option<&SymbolTable> {
        let (id, table) = self.vdso.get_or_init(super::vdso::own).as_ref()?;
        (!build_id.is_empty() && id == build_id).then_some(table)
    }

    fn get(&self, path: &Path, build_id: &[u8]) -> Opened {
        if let Some(f) = self.opened.borrow().get(&(path.to_path_buf(), build_id.to_vec())) {
            return f.clone();
        }
        let f = Rc::new(open_files(&self.live_path(path), build_id));
        self.opened.borrow_mut().insert((path.to_path_buf(), build_id.to_vec()), f.clone());
        f
    }

    /// Where to open `path`: the live process's executable through its descriptor when the
    /// file is gone (deleted since it started: the kernel names it `PATH (deleted)`, and the
    /// module record has either name; the build id still guards against another file), else
    /// `path`.
    fn live_path(&self, path: &Path) -> PathBuf {
        use std::os::fd::AsRawFd;
        let live = self.live_exe.borrow();
        let Some((file, exe)) = live.as_ref() else { return path.to_path_buf() };
        if path.exists() {
            return path.to_path_buf();
        }
        let mut deleted = exe.as_os_str().to_owned();
        deleted.push(" (deleted)");
        if path == exe || path.as_os_str() == deleted {
            PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
        } else {
            path.to_path_buf()
        }
    }
}

/// The module's own file and, when the DWARF lives elsewhere, its separate debug file.
pub struct Files {
    primary: Loader,
    /// Its own symbol table (`.symtab`, else `.dynsym`).
    symbols: SymbolTable,
    /// Its PLT entries (`puts@plt`), read from its own file: a separate debug file keeps no
    /// code.
    plt: SymbolTable,
    /// The separate debug file, when the primary has no DWARF.
    debug_path: Option<PathBuf>,
    /// Its symbol table, read without its DWARF.
    debug_symbols: OnceCell<SymbolTable>,
    /// Its DWARF, loaded on the first frame that needs it: that inflates megabytes (for libc),
    /// which frames the paths cut anyway never need.
    debug: OnceCell<Option<DebugDwarf>>,
    /// The module's own file, and its DWARF as the qualifier reads it (loaded on the first
    /// C++ frame DWARF names only briefly).
    path: PathBuf,
    own: OnceCell<Option<DebugDwarf>>,
    /// Where its functions begin, from its unwind table, read on the first frame no symbol
    /// names.
    bounds: OnceCell<FunctionBounds>,
}

/// Symbolizes addresses of a process from its module list ([`ModuleRecord`]s of the trace).
/// Module files are opened lazily, once each; modules that cannot be opened (deleted files,
/// another kernel's vDSO) give `module+0xOFFSET` frames.
pub struct ElfSymbolizer {
    modules: Vec<Module>,
    /// `(start, end, module index)` of every segment, sorted by start.
    ranges: Vec<(u64, u64, usize)>,
    cache: Rc<FileCache>,
}

impl ElfSymbolizer {
    /// Builds the address map from module records. Later loads win over earlier ones when
    /// ranges overlap (an address range reused after a `dlclose`).
    pub fn new(records: &[ModuleRecord]) -> Self {
        Self::with_cache(records, Rc::default())
    }

    /// As [`ElfSymbolizer::new`], taking opened files from `cache`.
    pub fn with_cache(records: &[ModuleRecord], cache: Rc<FileCache>) -> Self {
        let mut modules = Vec::new();
        let mut ranges = Vec::new();
        for r in records.iter().filter(|r| r.loaded) {
            let idx = modules.len();
            let path = r.path.to_string_lossy().into_owned();
            let basename = match r.path.file_name() {
                Some(n) => n.to_string_lossy().into_owned(),
                None if path.is_empty() => "[unknown]".to_string(),
                None => path.clone(),
            };
            modules.push(Module {
                path,
                file: r.path.clone(),
                basename,
                base: r.base,
                build_id: r.build_id.clone(),
                files: OnceCell::new(),
            });
            for s in &r.segments {
                let start = r.base.wrapping_add(s.vaddr);
                ranges.push((start, start.wrapping_add(s.memsz), idx));
            }
        }
        // Stable sort: for equal starts the later module stays later, and lookup prefers it.
        ranges.sort_by_key(|r| r.0);
        Self { modules, ranges, cache }
    }

    fn module_index(&self, addr: u64) -> Option<usize> {
        let n = self.ranges.partition_point(|r| r.0 <= addr);
        // Scan back over ranges starting at or below addr; the nearest containing one wins.
        // Segments rarely overlap, so this loop ends after a step or two.
        self.ranges[..n].iter().rev().take(64).find(|r| addr < r.1).map(|r| r.2)
    }

    fn module_of(&self, addr: u64) -> Option<&Module> {
        self.module_index(addr).map(|i| &self.modules[i])
    }

    /// The index (in load order) of the module holding return address `ret_addr`.
    pub fn module_of_return(&self, ret_addr: u64) -> Option<usize> {
        self.module_index(ret_addr.wrapping_sub(1))
    }

    /// Opens the files of the module holding `ret_addr` now, so that symbolizing it later is
    /// quick.
    pub fn warm(&self, ret_addr: u64) {
        if let Some(m) = self.module_of(ret_addr.wrapping_sub(1)) {
            m.files(&self.cache);
        }
    }

    /// The problem of each module that was used and could not be opened, by module index.
    pub fn module_warnings(&self) -> Vec<Option<String>> {
        self.modules.iter().map(|m| m.files.get().and_then(|f| f.as_ref().as_ref().err().cloned())).collect()
    }
}

impl Module {
    /// The vDSO and anonymous entries have no file to open; that is not worth a warning.
    fn has_file(&self) -> bool {
        !(self.path.is_empty() || super::vdso::is_vdso(&self.path) || self.path.starts_with('['))
    }

    fn files(&self, cache: &FileCache) -> Option<&Files> {
        if !self.has_file() {
            return None;
        }
        self.files.get_or_init(|| cache.get(&self.file, &self.build_id)).as_ref().as_ref().ok()
    }
}

fn open_files(module: &Path, build_id: &[u8]) -> Result<Files, String> {
    let path = module.to_string_lossy();
    let file = heaplens_trace::open_regular(module).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{path} is gone since the run: its frames are not symbolized"),
        _ => format!("cannot open {path}: {e}"),
    })?;
    let map = Mapped::new(&file).ok_or_else(|| format!("cannot map {path}"))?;
    let obj = object::File::parse(map.bytes()).map_err(|e| format!("cannot parse {path}: {e}"))?;
    let (file_id, debuglink) = ids(&obj);
    if let Some(file_id) = &file_id {
        // A rebuilt file would give confident wrong names: better none.
        if !build_id.is_empty() && file_id != build_id {
            return Err(format!("{path} changed since the run (build id differs): not symbolized"));
        }
    }
    let symbols = SymbolTable::read(&obj);
    let plt = SymbolTable::plt(&obj);
    let primary = Loader::new(module).map_err(|e| format!("cannot load {path}: {e}"))?;
    // Probing the section table is cheap; a separate debug file is looked for only when needed.
    let has_dwarf = primary.get_section_range(b".debug_info").is_some_and(|r| r.end > r.begin);
    let debug_path = if has_dwarf {
        None
    } else {
        let id = if build_id.is_empty() { file_id.unwrap_or_default() } else { build_id.to_vec() };
        debug_file(module, debuglink.as_deref(), &id)
    };
    Ok(Files {
        primary,
        symbols,
        plt,
        debug_path,
        debug_symbols: OnceCell::new(),
        debug: OnceCell::new(),
        path: module.to_path_buf(),
        own: OnceCell::new(),
        bounds: OnceCell::new(),
    })
}

/// The build id and `.gnu_debuglink` file name of an object file.
type Ids = (Option<Vec<u8>>, Option<Vec<u8>>);

fn ids(obj: &object::File<'_>) -> Ids {
    let link = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| name.to_vec());
    (obj.build_id().ok().flatten().map(<[u8]>::to_vec), link)
}

/// Finds the separate debug file of `path`: by build id under /usr/lib/debug/.build-id, then by
/// `.gnu_debuglink` (`link`) next to the file, in its `.debug/` directory, and under
/// /usr/lib/debug.
fn debug_file(path: &Path, link: Option<&[u8]>, id: &[u8]) -> Option<PathBuf> {
    if id.len() >= 2 {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let p = PathBuf::from(format!("{DEBUG_ROOT}/.build-id/{}/{}.debug", &hex[..2], &hex[2..]));
        if p.is_file() {
            return Some(p);
        }
    }
    let name = Path::new(std::str::from_utf8(link?).ok()?);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let canon_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let global = Path::new(DEBUG_ROOT).join(canon_dir.strip_prefix("/").unwrap_or(&canon_dir));
    [dir.join(name), dir.join(".debug").join(name), global.join(name)]
        .into_iter()
        .find(|p| p.is_file() && p.as_path() != path)
}

fn demangle(name: &str) -> String {
    super::dwarf::public_name(&super::demangle::demangle(name)).into_owned()
}

/// What `read` makes of the object file at `path`, mapped and parsed; the default when it
/// cannot be read.
fn read_object<T: Default>(path: &Path, read: impl FnOnce(&object::File<'_>) -> T) -> T {
    let Some(map) = heaplens_trace::open_regular(path).ok().and_then(|f| Mapped::new(&f)) else {
        return T::default();
    };
    object::File::parse(map.bytes()).map(|obj| read(&obj)).unwrap_or_default()
}

/// `name` without the ` [clone .cold]` / ` [clone .isra.0]` that the demangler appends for
/// a part of a function GCC split off or specialized: the same function to a person.
fn without_clone_suffix(name: String) -> String {
    match name.find(" [clone ") {
        Some(at) if name.ends_with(']') => name[..at].to_string(),
        _ => name,
    }
}

/// A symbol's name as reports show it: demangled, without its symbol version; a PLT entry's
/// keeps its `@plt`.
fn symbol_name(raw: &str) -> String {
    if let Some(function) = raw.strip_suffix("@plt") {
        return format!("{}@plt", demangle(function));
    }
    // `name@VERSION`, `name@@VERSION`; a symbol that starts with `@` has no name before it.
    let name = match raw.find('@') {
        Some(at) if at > 0 => &raw[..at],
        _ => raw,
    };
    demangle(name)
}

impl Files {
    /// The start of the function holding `probe` by the module's unwind table.
    fn function_start(&self, probe: u64) -> Option<u64> {
        self.bounds.get_or_init(|| read_object(&self.path, FunctionBounds::read)).start_of(probe)
    }

    /// The symbol-table entry containing `probe` (debug file first: a stripped file keeps only
    /// `.dynsym`).
    /// Its name, its address, and whether the name was mangled.
    fn symbol(&self, probe: u64) -> Option<(String, u64, bool)> {
        let named = |(name, a): (&str, u64)| (symbol_name(name), a, super::demangle::is_mangled(name));
        if let Some(entry) = self.plt.find(probe) {
            return Some(named(entry));
        }
        if let Some(p) = &self.debug_path {
            let syms = self.debug_symbols.get_or_init(|| read_object(p, SymbolTable::read));
            if !syms.is_empty() {
                return syms.find(probe).map(named);
            }
        }
        self.symbols.find(probe).map(named)
    }

    /// Appends the DWARF frames of `probe` (none when there is no DWARF for it); returns
    /// whether the outermost was named by its linkage name ([`push_all`]).
    fn push_frames(&self, probe: u64, unknown: &Frame, out: &mut Vec<Frame>) -> bool {
        match self.debug.get_or_init(|| self.debug_path.as_deref().and_then(DebugDwarf::load)) {
            Some(d) => d.push_frames(probe, unknown, out),
            None => {
                let qualify =
                    |die| self.own.get_or_init(|| DebugDwarf::load(&self.path)).as_ref()?.qualified(probe, die);
                self.primary.find_frames(probe).map(|f| push_all(f, unknown, out, &qualify)).unwrap_or(false)
            }
        }
    }
}

impl Symbolizer for ElfSymbolizer {
    fn warnings(&self) -> Vec<String> {
        self.module_warnings().into_iter().flatten().collect()
    }

    fn symbolize(&mut self, ret_addr: u64, out: &mut Vec<Frame>) {
        let Some(m) = self.module_of(ret_addr.wrapping_sub(1)) else {
            out.push(Frame::default());
            return;
        };
        let offset = ret_addr.wrapping_sub(m.base);
        if m.path.starts_with(heaplens_trace::event::POOL_MODULE_PREFIX) {
            // A program's pool (`include/heaplens.h`): its name is all there is.
            out.push(Frame { function: Some(m.path.clone()), module: Some(m.path.clone()), ..Frame::default() });
            return;
        }
        let unknown = Frame { module: Some(m.basename.clone()), module_offset: offset, ..Frame::default() };
        let probe = offset.wrapping_sub(1);
        if super::vdso::is_vdso(&m.path) {
            let symbol = self.cache.vdso(&m.build_id).and_then(|t| t.find(probe));
            out.push(match symbol {
                Some((name, addr)) => Frame {
                    function: Some(symbol_name(name)),
                    symbol_offset: Some(offset.wrapping_sub(addr)),
                    ..unknown
                },
                None => unknown,
            });
            return;
        }
        let Some(files) = m.files(&self.cache) else {
            out.push(unknown);
            return;
        };
        let symbol = files.symbol(probe);
        if let Some((name, addr, _)) = &symbol {
            if crate::paths::is_cut(name) {
                // The paths drop this frame: its name is all it needs.
                out.push(Frame {
                    function: Some(name.clone()),
                    symbol_offset: Some(offset.wrapping_sub(*addr)),
                    ..unknown
                });
                return;
            }
        }
        let start = out.len();
        let linkage = files.push_frames(probe, &unknown, out);
        if out.len() == start {
            // No DWARF for this address: one frame from the symbol table.
            out.push(unknown);
        }
        let last = out.last_mut().expect("at least one frame was pushed");
        if let Some((name, addr, mangled)) = symbol {
            last.symbol_offset = Some(offset.wrapping_sub(addr));
            // DWARF's short name of a C++ function (no linkage name given) loses its class
            // and, for a lambda, the function it belongs to: the symbol's qualified name
            // tells `make_fn()::{lambda()#1}::operator()` from any other `operator()`.
            if last.function.is_none() || (mangled && !linkage) {
                last.function = Some(without_clone_suffix(name));
            }
        } else if last.function.is_none() {
            // A function no symbol names: its frames are grouped by where it starts.
            last.symbol_offset = files.function_start(probe).map(|s| offset.wrapping_sub(s));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn symbol_versions_go_and_names_stay() {
        assert_eq!(super::symbol_name("memcpy@@GLIBC_2.14"), "memcpy");
        assert_eq!(super::symbol_name("malloc@GLIBC_2.2.5"), "malloc");
        assert_eq!(super::symbol_name("@/etc/passwd"), "@/etc/passwd");
        assert_eq!(super::symbol_name("plain"), "plain");
        assert_eq!(super::symbol_name("puts@plt"), "puts@plt");
        assert_eq!(super::symbol_name("_ZdlPv@plt"), "operator delete(void*)@plt");
    }
}
