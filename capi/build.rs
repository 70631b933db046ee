//! Compiles the C shim of the libcpc/libpctx layer: the things Rust cannot write on stable,
//! calling a `va_list`-taking error handler and reading the variadic arguments of
//! `pctx_set_events`.

fn main() {
    println!("cargo:rerun-if-changed=src/cpc/varargs.c");
    cc::Build::new()
        .file("src/cpc/varargs.c")
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-Werror")
        .compile("perfcompat_cpc_varargs");
}
