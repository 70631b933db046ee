/* The flag that arm64's outline atomics read (issue 48, loading the library): linked into
 * libperfcompat.so.1 before the Rust archive by tools/install.sh on arm64 only.
 *
 * Rust's aarch64-unknown-linux-gnu code calls __aarch64_cas4_acq and the like for its atomics;
 * those helpers (compiler-builtins) choose the LSE instruction or the load/store-exclusive loop
 * by the byte __aarch64_have_lse_atomics. The archive defines it in the same object as
 * __init_cpu_features, a second constructor that reads a dozen CPU ID registers, each an
 * instruction the kernel traps and emulates: about 50,000 instructions at every load of the
 * library in the arm64 guest, for a table (__aarch64_cpu_features) that only function
 * multiversioning reads, which nothing in the library uses. Defined here, the linker never
 * pulls that object: the flag is set the same way (the kernel's HWCAP_ATOMICS bit), by one
 * getauxval, first of the library's constructors: priority 90, compiler-rt's own for this flag,
 * before std's 99 (its argument capture) and the unprioritised rest. The priority is given by
 * the section name (.init_array.00090, sorted first by the linker) because GCC reserves
 * constructor priorities under 101 for the compiler's runtime, which this stands in for. */
#include <sys/auxv.h>

#ifndef HWCAP_ATOMICS
#define HWCAP_ATOMICS (1 << 8)
#endif

/* Read by the outline-atomics helpers; hidden by the library's version script. */
_Bool __aarch64_have_lse_atomics;

__attribute__((hot)) static void perfcompat_init_lse_atomics(void) {
    __aarch64_have_lse_atomics = (getauxval(AT_HWCAP) & HWCAP_ATOMICS) != 0;
}

__attribute__((used, section(".init_array.00090"))) static void (*const perfcompat_lse_ctor)(void) =
    perfcompat_init_lse_atomics;
