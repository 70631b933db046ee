//! Compiles the C shim of the libcpc/libpctx layer: the two things Rust cannot write on stable,
//! calling a `va_list`-taking error handler and reading `pctx_set_events`'s variadic arguments.

fn main() {
    println!("cargo:rerun-if-changed=src/cpc/varargs.c");
    cc::Build::new()
        .file("src/cpc/varargs.c")
        .warnings(true)
        .extra_warnings(true)
        .flag_if_supported("-Werror")
        .compile("perfcompat_cpc_varargs");
}
