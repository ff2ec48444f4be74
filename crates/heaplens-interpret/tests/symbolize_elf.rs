//! The real symbolizer on real binaries compiled here with gcc/g++ -g: names, file:line,
//! demangling, separate debug files, and the fallbacks.

use std::path::{Path, PathBuf};
use std::process::Command;

use heaplens_interpret::{ElfSymbolizer, Frame, Symbolizer};
use heaplens_trace::{ModuleRecord, Segment};
use object::{Object, ObjectSegment, ObjectSymbol};

const BASE: u64 = 0x5555_5555_0000;

const C_SRC: &str = r#"#include <stdlib.h>
static int counter;
__attribute__((noinline)) void *target_fn(int n)
{
    counter += n;
    return malloc(n);
}
int main(void) { free(target_fn(3)); return counter - 3; }
"#;

const CXX_SRC: &str = r#"#include <cstdlib>
namespace widgets {
struct Factory {
    __attribute__((noinline)) static void *make(int n, const char *tag)
    {
        return std::malloc(n + (tag != nullptr));
    }
};
}
int main() { std::free(widgets::Factory::make(3, "x")); return 0; }
"#;

fn workdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heaplens-sym-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `src` with `compiler -g -O0`; `None` when the compiler is missing.
fn compile(compiler: &str, src: &str, dir: &Path, file: &str) -> Option<PathBuf> {
    let src_path = dir.join(file);
    std::fs::write(&src_path, src).unwrap();
    let out = dir.join(file.split('.').next().unwrap());
    let st = Command::new(compiler).arg("-g").arg("-O0").arg("-o").arg(&out).arg(&src_path).status().ok()?;
    assert!(st.success(), "{compiler} failed");
    Some(out)
}

/// [`compile`] with gcc, saying so when the test is skipped for want of it.
fn gcc(src: &str, dir: &Path, file: &str) -> Option<PathBuf> {
    let bin = compile("gcc", src, dir, file);
    if bin.is_none() {
        eprintln!("gcc not found: skipped");
    }
    bin
}

/// A copy of `bin` stripped of every symbol table but `.dynsym` (`strip --strip-all`), as
/// `dir/name`; `None`, saying so, without `strip`.
fn stripped(bin: &Path, dir: &Path, name: &str) -> Option<PathBuf> {
    let out = dir.join(name);
    let st = Command::new("strip").arg("--strip-all").arg("-o").arg(&out).arg(bin).status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("strip not found: skipped");
        return None;
    }
    Some(out)
}

/// The module record the monitor would write for `bin` loaded at [`BASE`].
fn module(bin: &Path) -> ModuleRecord {
    let data = std::fs::read(bin).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let segments = obj.segments().map(|s| Segment { vaddr: s.address(), memsz: s.size(), flags: 5 }).collect();
    ModuleRecord { ts: 0, loaded: true, base: BASE, path: bin.to_path_buf(), build_id: Vec::new(), segments }
}

/// Address of the symbol whose (mangled) name contains `needle`.
fn symbol_addr(bin: &Path, needle: &str) -> u64 {
    let data = std::fs::read(bin).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    obj.symbols().find(|s| s.name().is_ok_and(|n| n.contains(needle)) && s.size() > 0).unwrap().address()
}

fn frames(sym: &mut ElfSymbolizer, ret: u64) -> Vec<Frame> {
    let mut out = Vec::new();
    sym.symbolize(ret, &mut out);
    out
}

#[test]
fn c_function_name_file_and_line() {
    let dir = workdir("c");
    let Some(bin) = gcc(C_SRC, &dir, "t.c") else { return };
    let addr = symbol_addr(&bin, "target_fn");
    let mut sym = ElfSymbolizer::new(&[module(&bin)]);
    // A return address one byte past the function's first instruction looks up that
    // instruction: the line of the opening brace (gcc) or of the declarator.
    let f = frames(&mut sym, BASE + addr + 1);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].function.as_deref(), Some("target_fn"));
    assert!(f[0].file.as_deref().is_some_and(|p| p.ends_with("t.c")), "{f:?}");
    assert!(matches!(f[0].line, Some(3 | 4)), "{f:?}");
    assert_eq!(f[0].module.as_deref(), Some("t"));
    assert_eq!(f[0].module_offset, addr + 1);
    assert_eq!(f[0].symbol_offset, Some(1));

    // Outside every module: an unnamed frame without module.
    let f = frames(&mut sym, 0x10);
    assert_eq!((f[0].function.as_deref(), f[0].module.as_deref()), (None, None));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cxx_names_are_demangled() {
    let dir = workdir("cxx");
    let Some(bin) = compile("g++", CXX_SRC, &dir, "w.cc") else {
        eprintln!("g++ not found: skipped");
        return;
    };
    let addr = symbol_addr(&bin, "Factory4make");
    let mut sym = ElfSymbolizer::new(&[module(&bin)]);
    let f = frames(&mut sym, BASE + addr + 1);
    assert_eq!(f.last().unwrap().function.as_deref(), Some("widgets::Factory::make(int, char const*)"), "{f:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn separate_debug_file_by_debuglink_and_symbol_fallback() {
    let dir = workdir("debuglink");
    let Some(bin) = gcc(C_SRC, &dir, "t.c") else { return };
    let addr = symbol_addr(&bin, "target_fn");
    let run = |args: &[&str]| Command::new(args[0]).args(&args[1..]).current_dir(&dir).status().map(|s| s.success());
    if run(&["objcopy", "--only-keep-debug", "t", "t.debug"]).ok() != Some(true) {
        eprintln!("objcopy not found: skipped");
        return;
    }
    assert_eq!(run(&["strip", "--strip-all", "t"]).ok(), Some(true));
    assert_eq!(run(&["objcopy", "--add-gnu-debuglink=t.debug", "t"]).ok(), Some(true));
    let mut sym = ElfSymbolizer::new(&[module(&bin)]);
    let f = frames(&mut sym, BASE + addr + 1);
    assert_eq!(f[0].function.as_deref(), Some("target_fn"), "{f:?}");
    assert!(matches!(f[0].line, Some(3 | 4)), "{f:?}");

    // Without the debug file, a fully stripped executable names nothing: module+offset.
    std::fs::remove_file(dir.join("t.debug")).unwrap();
    let mut sym = ElfSymbolizer::new(&[module(&bin)]);
    let f = frames(&mut sym, BASE + addr + 1);
    assert_eq!((f[0].function.as_deref(), f[0].module.as_deref(), f[0].module_offset), (None, Some("t"), addr + 1));
    std::fs::remove_dir_all(&dir).ok();
}

/// This process's vDSO as the monitor records it (from `/proc/self/maps` and the image's own
/// program headers), and the image's address of `__vdso_clock_gettime`; `None` without one.
fn own_vdso() -> Option<(ModuleRecord, u64)> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
    let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
    let mut image = vec![0u8; (hi - lo) as usize];
    std::fs::File::open("/proc/self/mem").ok()?.read_exact_at(&mut image, lo).ok()?;
    let obj = object::File::parse(&*image).ok()?;
    let segments = obj.segments().map(|s| Segment { vaddr: s.address(), memsz: s.size(), flags: 5 }).collect();
    let build_id = obj.build_id().ok()??.to_vec();
    let at = obj.dynamic_symbols().find(|s| s.name() == Ok("__vdso_clock_gettime"))?.address();
    Some((ModuleRecord { ts: 0, loaded: true, base: lo, path: "linux-vdso.so.1".into(), build_id, segments }, at))
}

/// (Issue 19's CPU samples.) The vDSO is no file: its frames are named from heaplens' own copy
/// of this kernel's image, and only when the recorded build id is that image's.
#[test]
fn vdso_frames_are_named_when_the_kernel_is_this_one() {
    let Some((m, at)) = own_vdso() else {
        eprintln!("no vDSO with a build id here: skipped");
        return;
    };
    let mut sym = ElfSymbolizer::new(std::slice::from_ref(&m));
    let f = frames(&mut sym, m.base + at + 5);
    assert_eq!(
        (f[0].function.as_deref(), f[0].module.as_deref(), f[0].symbol_offset),
        (Some("__vdso_clock_gettime"), Some("linux-vdso.so.1"), Some(5))
    );
    assert!(sym.warnings().is_empty());
    // Another kernel's vDSO (a trace symbolized elsewhere): offsets, as before.
    let other = ModuleRecord { build_id: m.build_id.iter().map(|b| b ^ 0xff).collect(), ..m.clone() };
    let f = frames(&mut ElfSymbolizer::new(&[other]), m.base + at + 5);
    assert_eq!((f[0].function.as_deref(), f[0].module_offset), (None, at + 5));
}

/// PLT entries `objdump -d` names `puts@plt`; no symbol covers them, and a CPU sample there
/// used to take the nearest symbol before them, `_init`.
#[test]
fn plt_entries_are_named_as_objdump_names_them() {
    let dir = workdir("plt");
    let src = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
               int main(int c, char **v) { char *p = malloc(64); strcpy(p, v[0]); puts(p); free(p); return c - 1; }\n";
    let Some(bin) = gcc(src, &dir, "p.c") else { return };
    let Ok(dump) =
        Command::new("objdump").args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"]).arg(&bin).output()
    else {
        eprintln!("objdump not found: skipped");
        return;
    };
    // `0000000000001030 <puts@plt>:`
    let entries: Vec<(u64, String)> = String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            (name.ends_with("@plt") && !name.contains('-') && !name.contains('+'))
                .then(|| (u64::from_str_radix(addr, 16).ok(), name.to_string()))
                .and_then(|(a, n)| Some((a?, n)))
        })
        .collect();
    let names: Vec<&str> = entries.iter().map(|e| e.1.as_str()).collect();
    for want in ["malloc@plt", "puts@plt", "free@plt"] {
        assert!(names.contains(&want), "objdump lists no {want}: {names:?}");
    }
    let mut sym = ElfSymbolizer::new(&[module(&bin)]);
    for (addr, name) in &entries {
        // A sample's instruction pointer is recorded plus one, as a return address.
        for inside in [0, 5] {
            let f = frames(&mut sym, BASE + addr + inside + 1);
            assert_eq!(f.last().unwrap().function.as_deref(), Some(name.as_str()), "at {addr:#x}+{inside}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A stripped program's static function has no name, but its frames are told by where the
/// function starts (from `.eh_frame`, which stripping keeps): any two addresses inside it give
/// the same `function_offset`, the address the full symbol table gives the function.
#[test]
fn stripped_functions_are_bounded_by_the_unwind_table() {
    let dir = workdir("bounds");
    let src = "#include <stdlib.h>\n\
               __attribute__((noinline)) static void *worker(int n) { void *a = malloc(n); free(malloc(n + 1)); return a; }\n\
               int main(int c, char **v) { (void)v; free(worker(c)); return 0; }\n";
    let Some(bin) = gcc(src, &dir, "s.c") else { return };
    let data = std::fs::read(&bin).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let worker = obj.symbols().find(|s| s.name() == Ok("worker")).expect("worker in .symtab");
    let (start, size) = (worker.address(), worker.size());
    let Some(stripped) = stripped(&bin, &dir, "s.stripped") else { return };
    let mut sym = ElfSymbolizer::new(&[module(&stripped)]);
    for inside in [1, size / 2, size - 1] {
        let f = frames(&mut sym, BASE + start + inside + 1);
        let last = f.last().unwrap();
        assert_eq!(last.function, None, "{last:?}");
        assert_eq!(last.module_offset, start + inside + 1);
        assert_eq!(last.function_offset(), start, "at worker+{inside:#x}: {last:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A program's file is a stranger's: its unwind table, PLT, relocations and symbols, damaged
/// at random (300 copies of a stripped program, 1-64 bytes overwritten in those sections
/// each), cost names, never a panic or a hang.
#[test]
fn damaged_sections_cost_names_not_the_symbolizer() {
    use object::ObjectSection;
    let dir = workdir("damaged-sections");
    let Some(bin) = gcc(C_SRC, &dir, "d.c") else { return };
    let Some(stripped) = stripped(&bin, &dir, "d.stripped") else { return };
    let data = std::fs::read(&stripped).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let sections = [".eh_frame", ".eh_frame_hdr", ".plt", ".plt.got", ".plt.sec", ".rela.plt", ".rela.dyn", ".dynsym"];
    let ranges: Vec<(u64, u64)> =
        sections.iter().filter_map(|n| obj.section_by_name(n)?.file_range()).filter(|r| r.1 > 0).collect();
    assert!(ranges.len() >= 4, "{ranges:?}");
    let text = obj.section_by_name(".text").unwrap();
    let (text_at, text_len) = (text.address(), text.size());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let copy = dir.join("d.damaged");
    for _ in 0..300 {
        let mut d = data.clone();
        for _ in 0..1 + rnd() % 64 {
            let (at, len) = ranges[(rnd() % ranges.len() as u64) as usize];
            d[(at + rnd() % len) as usize] = rnd() as u8;
        }
        // A new file each time: the module cache is by path.
        std::fs::remove_file(&copy).ok();
        std::fs::write(&copy, &d).unwrap();
        let mut sym = ElfSymbolizer::new(&[module(&copy)]);
        for _ in 0..50 {
            let f = frames(&mut sym, BASE + text_at + rnd() % text_len + 1);
            assert!(!f.is_empty());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unopenable_modules_give_module_offsets() {
    let m = ModuleRecord {
        ts: 0,
        loaded: true,
        base: 0x7fff_0000_0000,
        path: "linux-vdso.so.1".into(),
        build_id: Vec::new(),
        segments: vec![Segment { vaddr: 0, memsz: 0x2000, flags: 5 }],
    };
    let mut sym = ElfSymbolizer::new(&[m]);
    let f = frames(&mut sym, 0x7fff_0000_0123);
    assert_eq!(
        (f[0].function.as_deref(), f[0].module.as_deref(), f[0].module_offset),
        (None, Some("linux-vdso.so.1"), 0x123)
    );
}

#[test]
fn rebuilt_module_is_not_trusted() {
    let dir = workdir("buildid");
    let Some(bin) = gcc(C_SRC, &dir, "t.c") else { return };
    let data = std::fs::read(&bin).unwrap();
    let real_id = object::File::parse(&*data).unwrap().build_id().unwrap().map(<[u8]>::to_vec);
    let Some(real_id) = real_id else {
        eprintln!("gcc wrote no build id: skipped");
        return;
    };
    let addr = symbol_addr(&bin, "target_fn");

    // The recorded build id matches: names resolve, no warning.
    let mut m = module(&bin);
    m.build_id = real_id.clone();
    let mut sym = ElfSymbolizer::new(&[m.clone()]);
    assert_eq!(frames(&mut sym, BASE + addr + 1)[0].function.as_deref(), Some("target_fn"));
    assert!(sym.warnings().is_empty());

    // The file on disk is not the one that ran: no names, and one warning saying so.
    m.build_id = real_id.iter().map(|b| b ^ 0xff).collect();
    let mut sym = ElfSymbolizer::new(&[m]);
    let f = frames(&mut sym, BASE + addr + 1);
    assert_eq!((f[0].function.as_deref(), f[0].module.as_deref()), (None, Some("t")));
    let w = sym.warnings();
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("build id"), "{w:?}");
    std::fs::remove_dir_all(&dir).ok();
}
