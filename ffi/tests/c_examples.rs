//! Builds the C and C++ examples (`examples/c`, `examples/cpp` at the
//! repository root) with `-Wall -Wextra -Werror -pedantic` against this
//! crate's static library (C) and shared library (C++), runs them, and
//! asserts they exit 0. Also compiles the header alone as C11 and C++17,
//! and the C++ RAII header `railyard.hpp` alone as C++17. (The installed
//! package, pkg-config and CMake, is exercised by `ci/readme.sh`.)
//!
//! Every example is also built with `-fsanitize=address,undefined` and run
//! (leak detection on), so a C-side misuse of the ABI — or a Rust write
//! beyond an out-pointer — fails the test. Set `RY_FFI_NO_SANITIZERS=1` on
//! a toolchain without libasan/libubsan.
//!
//! The library is built with the per-layer ABI (`--features layers`) and
//! the examples with `-DRY_LAYERS`, except `readme_example.c` and
//! `examples/verbs`, which use only the default ABI (the composed hot
//! path) and are built without it.
//!
//! `examples/c/engine.c` (the verbs engine) needs the `engine` feature:
//! with it (`cargo test -p railyard-ffi --features engine`) it is linked
//! against libibverbs and run (on a host without RDMA it runs its
//! configuration and handle checks, then prints a SKIP line; ci/rxe.sh
//! runs it in the Soft-RoCE guest); without it, it is only compiled
//! (`-DRY_ENGINE -c`) so the engine declarations of the header stay
//! checked.
//!
//! Compilers: `$CC` / `$CXX`, default `cc` / `c++`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ffi/ has a parent")
        .to_path_buf()
}

/// `target/<profile>`, after making sure librailyard_ffi.{a,so} there are
/// current: `cargo test` builds only the rlib of a library for its tests,
/// so this runs `cargo build -p railyard-ffi` for the same profile and
/// target directory (a no-op when nothing changed).
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("current_exe");
            let dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("test binary lives in target/<profile>/deps")
                .to_path_buf();
            let profile = dir.file_name().expect("profile dir").to_string_lossy();
            let target = dir.parent().expect("target dir");
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-q", "-p", "railyard-ffi", "--target-dir"])
                .arg(target);
            cmd.args([
                "--features",
                if ENGINE { "layers,engine" } else { "layers" },
            ]);
            if profile == "release" {
                cmd.arg("--release");
            }
            run(&mut cmd);
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
            for lib in ["librailyard_ffi.a", "librailyard_ffi.so"] {
                let p = dir.join(lib);
                let lib_t = p
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                for f in std::fs::read_dir(&src).expect("ffi/src") {
                    let f = f.expect("entry").path();
                    let t = f.metadata().and_then(|m| m.modified()).expect("mtime");
                    assert!(lib_t >= t, "{} is older than {}", p.display(), f.display());
                }
            }
            dir
        })
        .clone()
}

fn compiler(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const WARN: [&str; 4] = ["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Whether the library under test has the verbs engine.
const ENGINE: bool = cfg!(feature = "engine");

/// What a static link needs besides the library (the engine's verbs).
fn static_link_libs() -> Vec<&'static str> {
    let mut v = vec!["-lpthread", "-ldl", "-lm"];
    if ENGINE {
        v.extend(["-libverbs", "-lrdmacm"]);
    }
    v
}

fn is_engine_example(src: &Path) -> bool {
    src.file_stem().is_some_and(|s| s == "engine")
}

/// `-DRY_LAYERS` for an example that uses the per-layer ABI: all but the
/// README's, which integrates through the hot path only; with it
/// `-DRY_EXAMPLE_PEER_FEEDBACK`: [`lib_dir`] builds the library with its
/// default features, which compile the RFC 4534 peer ledger in (so
/// `peer_accounting = 1` is accepted).
fn layers_define(src: &Path) -> Vec<&'static str> {
    if src.file_stem().is_some_and(|s| s == "readme_example") {
        vec![]
    } else {
        vec!["-DRY_LAYERS", "-DRY_EXAMPLE_PEER_FEEDBACK"]
    }
}

/// The engine example's verdict: all checks passed, or (no RDMA device
/// here) the host-side checks passed and it skipped the device part.
fn assert_engine_output(stdout: &str) {
    let ran =
        stdout.contains("RAN ry_engine_c") && stdout.contains("ry_engine_c: all checks passed");
    let skipped = stdout.contains("ry_engine_c: host checks passed")
        && stdout.contains("SKIP ry_engine_c: no RDMA device found");
    assert!(ran || skipped, "engine example: {stdout}");
    if skipped {
        eprintln!("engine example: no RDMA device here, device part skipped (ci/rxe.sh runs it)");
    }
}

/// Without the `engine` feature, engine.c is compiled (not linked) so the
/// header's `RY_ENGINE` declarations are still checked; returns true if
/// `src` was handled that way.
fn compile_only_without_engine(src: &Path, compiler: &str, std: &str) -> bool {
    if ENGINE || !is_engine_example(src) {
        return false;
    }
    let root = repo_root();
    let obj = out_dir().join("engine_compile_only.o");
    run(Command::new(compiler)
        .arg(std)
        .args(WARN)
        .arg("-DRY_ENGINE")
        .args(layers_define(src))
        .arg("-I")
        .arg(root.join("ffi/include"))
        .arg("-I")
        .arg(root.join("examples/c"))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(&obj));
    true
}

fn sources(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .{ext} examples in {}", dir.display());
    v
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ffi-examples");
    std::fs::create_dir_all(&d).expect("create out dir");
    d
}

#[test]
fn header_compiles_as_c11_and_cpp17() {
    let root = repo_root();
    let inc = root.join("ffi/include");
    let out = out_dir();
    let src_c = out.join("header_only.c");
    let src_cpp = out.join("header_only.cpp");
    let body = "#include \"railyard.h\"\n#include \"railyard.h\" /* guard */\nint main(void) { return RY_STATUS_OK; }\n";
    std::fs::write(&src_c, body).expect("write");
    // C++: the RAII header too (with RY_ENGINE below, its ry::Engine).
    let body_cpp = format!(
        "#include \"railyard.hpp\"\n#include \"railyard.hpp\" /* guard */\n{}",
        body.replace("(void)", "()")
    );
    std::fs::write(&src_cpp, body_cpp).expect("write");
    // Without and with the engine and the per-layer declarations.
    for engine in [None, Some("-DRY_ENGINE")] {
        for layers in [None, Some("-DRY_LAYERS")] {
            run(Command::new(compiler("CC", "cc"))
                .args(["-std=c11", "-fsyntax-only"])
                .args(WARN)
                .args(engine)
                .args(layers)
                .arg("-I")
                .arg(&inc)
                .arg(&src_c));
            run(Command::new(compiler("CXX", "c++"))
                .args(["-std=c++17", "-fsyntax-only"])
                .args(WARN)
                .args(engine)
                .args(layers)
                .arg("-I")
                .arg(&inc)
                .arg(&src_cpp));
        }
    }
}

#[test]
fn c_examples_build_and_pass_against_the_static_library() {
    let root = repo_root();
    let lib = lib_dir().join("librailyard_ffi.a");
    let out = out_dir();
    for src in sources(&root.join("examples/c"), "c") {
        if compile_only_without_engine(&src, &compiler("CC", "cc"), "-std=c11") {
            continue;
        }
        let exe = out.join(src.file_stem().expect("stem"));
        run(Command::new(compiler("CC", "cc"))
            .arg("-std=c11")
            .args(WARN)
            .args(ENGINE.then_some("-DRY_ENGINE"))
            .args(layers_define(&src))
            .arg("-I")
            .arg(root.join("ffi/include"))
            .arg("-I")
            .arg(root.join("examples/c"))
            .arg(&src)
            .arg(&lib)
            .args(static_link_libs())
            .arg("-o")
            .arg(&exe));
        let stdout = run(&mut Command::new(&exe));
        if is_engine_example(&src) {
            assert_engine_output(&stdout);
            continue;
        }
        assert!(
            stdout.contains("all checks passed"),
            "{}: {stdout}",
            src.display()
        );
    }
}

#[test]
fn cpp_examples_build_and_pass_against_the_shared_library() {
    let root = repo_root();
    let dir = lib_dir();
    let out = out_dir();
    for src in sources(&root.join("examples/cpp"), "cpp") {
        let exe = out.join(format!(
            "{}_cpp",
            src.file_stem().expect("stem").to_string_lossy()
        ));
        run(Command::new(compiler("CXX", "c++"))
            .arg("-std=c++17")
            .args(WARN)
            .args(layers_define(&src))
            .arg("-I")
            .arg(root.join("ffi/include"))
            .arg("-I")
            .arg(root.join("examples/c"))
            .arg(&src)
            .arg("-L")
            .arg(&dir)
            .arg("-lrailyard_ffi")
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .args(["-pthread", "-o"])
            .arg(&exe));
        let stdout = run(&mut Command::new(&exe));
        assert!(stdout.contains("railyard C++ example"), "{stdout}");
    }
}

#[test]
fn all_examples_pass_under_asan_and_ubsan() {
    if std::env::var_os("RY_FFI_NO_SANITIZERS").is_some() {
        eprintln!("sanitizer run disabled by RY_FFI_NO_SANITIZERS");
        return;
    }
    let root = repo_root();
    let lib = lib_dir().join("librailyard_ffi.a");
    let out = out_dir();
    let san = [
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ];
    let mut srcs: Vec<(PathBuf, String, &str)> = sources(&root.join("examples/c"), "c")
        .into_iter()
        .map(|p| (p, compiler("CC", "cc"), "-std=c11"))
        .collect();
    srcs.extend(
        sources(&root.join("examples/cpp"), "cpp")
            .into_iter()
            .map(|p| (p, compiler("CXX", "c++"), "-std=c++17")),
    );
    for (src, cc, std) in srcs {
        if compile_only_without_engine(&src, &cc, std) {
            continue;
        }
        let exe = out.join(format!(
            "{}_asan",
            src.file_name().expect("name").to_string_lossy()
        ));
        run(Command::new(cc)
            .arg(std)
            .args(WARN)
            .args(san)
            .args(ENGINE.then_some("-DRY_ENGINE"))
            .args(layers_define(&src))
            .arg("-I")
            .arg(root.join("ffi/include"))
            .arg("-I")
            .arg(root.join("examples/c"))
            .arg(&src)
            .arg(&lib)
            .args(static_link_libs())
            .arg("-o")
            .arg(&exe));
        let stdout = run(Command::new(&exe).env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1"));
        if is_engine_example(&src) {
            assert_engine_output(&stdout);
        }
    }
}

/// `examples/verbs/*.cpp`: transports over libibverbs that use only the
/// composed hot path (`ry_hotpath_*`) for ownership, CC and classification.
/// Built with `-std=c++17 -Wall -Wextra -Werror -pedantic` against the
/// static library and libibverbs and run: without an RDMA device they
/// print a SKIP line; ci/rxe.sh runs them in the Soft-RoCE guest, where
/// they must pass.
#[test]
fn verbs_examples_build_and_run() {
    let root = repo_root();
    let lib = lib_dir().join("librailyard_ffi.a");
    let out = out_dir();
    for src in sources(&root.join("examples/verbs"), "cpp") {
        let stem = src
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .into_owned();
        let exe = out.join(format!("{stem}_verbs"));
        run(Command::new(compiler("CXX", "c++"))
            .arg("-std=c++17")
            .args(WARN)
            .arg("-I")
            .arg(root.join("ffi/include"))
            .arg(&src)
            .arg(&lib)
            .args(["-libverbs", "-lpthread", "-ldl", "-lm", "-o"])
            .arg(&exe));
        let stdout = run(&mut Command::new(&exe));
        assert!(
            stdout.contains(": all checks passed") || stdout.contains("no RDMA device found"),
            "{stem}: {stdout}"
        );
    }
}
