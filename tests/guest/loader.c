/* What the dynamic loader has to do for libperfcompat.so.1 (issue 48, loading the library),
 * read from the library as this process loaded it (its dynamic section, through
 * dl_iterate_phdr):
 *   constructors   at most 4 (.init_array): the outline atomics' flag (capi/link/
 *                  lse_atomics.c), std's argument capture, crtbegin's frame_dummy and the
 *                  preload constructor (capi/src/preload.rs); the archive's __init_cpu_features
 *                  (a dozen trapped ID-register reads at every load) is not linked in.
 *   lookups        at most 16 symbol lookups at load: the relocations of .rela.dyn that name a
 *                  symbol, plus every PLT slot (.rela.plt) if the library asks to be bound at
 *                  load (DF_BIND_NOW, DF_1_NOW). The C library's functions are bound lazily, at
 *                  their first call (tools/install.sh says why): binding the 120 PLT slots at
 *                  every load was a quarter of the library's loading cost.
 *   pages          at most 7 pages written by the relocations at load (each copied on write,
 *                  about 12 k instructions with its relocations): our crates are built in one
 *                  code generation unit each (Cargo.toml, profile shipped), so that inlined
 *                  copies of a bounds check share one panic location record (13 pages with
 *                  the release profile's sixteen units a crate: 11), the few relocated
 *                  writable data lie on the GOT's page (capi/link/relocated-data.ld: 9), and
 *                  the event tables hold their strings in place, without pointers
 *                  (base::text::Text: 7). */
#define _GNU_SOURCE
#include "guest.h"
#include <elf.h>
#include <libcpc.h>
#include <link.h>

struct found {
  const ElfW(Dyn) *dyn;
  ElfW(Addr) base;
};

static int find(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct found *f = arg;
  if (!strstr(info->dlpi_name, "libperfcompat.so") && !strstr(info->dlpi_name, "libcpc.so"))
    return 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      f->dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
      f->base = info->dlpi_addr;
      return 1;
    }
  return 0;
}

/* The relocations of a table that name a symbol: each a lookup when it is processed. */
static uint64_t named_relocations(uint64_t at, uint64_t bytes) {
  const ElfW(Rela) *r = (const ElfW(Rela) *)at;
  uint64_t n = 0;
  for (uint64_t i = 0; r && i < bytes / sizeof *r; i++)
    n += ELF64_R_SYM(r[i].r_info) != 0;
  return n;
}

/* The 4 KiB pages the relocations of a table write: marked in `seen` (page numbers from 0). */
static void mark_pages(uint64_t at, uint64_t bytes, unsigned char *seen, uint64_t limit) {
  const ElfW(Rela) *r = (const ElfW(Rela) *)at;
  for (uint64_t i = 0; r && i < bytes / sizeof *r; i++)
    if (r[i].r_offset >> 12 < limit)
      seen[r[i].r_offset >> 12] = 1;
}

int main(void) {
  /* A call into the library, so that the link keeps it. */
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  struct found f = {0};
  dl_iterate_phdr(find, &f);
  check("loader.found", f.dyn != NULL, "the dynamic section of libperfcompat.so.1 %s",
        f.dyn ? "found" : "not among the loaded objects");
  if (!f.dyn)
    return guest_exit();
  uint64_t init_bytes = 0, rela = 0, rela_bytes = 0, plt = 0, plt_bytes = 0, flags = 0, flags1 = 0;
  int bind_now = 0;
  for (const ElfW(Dyn) *d = f.dyn; d->d_tag != DT_NULL; d++)
    switch (d->d_tag) {
    case DT_INIT_ARRAYSZ: init_bytes = d->d_un.d_val; break;
    case DT_RELA: rela = d->d_un.d_ptr; break;
    case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
    case DT_JMPREL: plt = d->d_un.d_ptr; break;
    case DT_PLTRELSZ: plt_bytes = d->d_un.d_val; break;
    case DT_FLAGS: flags = d->d_un.d_val; break;
    case DT_FLAGS_1: flags1 = d->d_un.d_val; break;
    case DT_BIND_NOW: bind_now = 1; break;
    }
  uint64_t ctors = init_bytes / sizeof(void *);
  check("loader.constructors", ctors <= 4,
        "%llu constructors in .init_array (at most 4: no __init_cpu_features)",
        (unsigned long long)ctors);
  /* The loader relocated the dynamic section's addresses in place (glibc on arm64); an
   * address below the base is still the file's. */
  if (rela && rela < f.base)
    rela += f.base;
  if (plt && plt < f.base)
    plt += f.base;
  bind_now |= (flags & DF_BIND_NOW) != 0 || (flags1 & DF_1_NOW) != 0;
  uint64_t named = named_relocations(rela, rela_bytes);
  uint64_t slots = named_relocations(plt, plt_bytes);
  uint64_t lookups = named + (bind_now ? slots : 0);
  check("loader.lookups", rela != 0 && plt != 0 && lookups <= 16,
        "%llu symbol lookups at load (at most 16): %llu in .rela.dyn, %llu PLT slots bound %s",
        (unsigned long long)lookups, (unsigned long long)named, (unsigned long long)slots,
        bind_now ? "at load (-z now)" : "lazily");
  static unsigned char seen[4096]; /* pages of the first 16 MiB of the library */
  mark_pages(rela, rela_bytes, seen, sizeof seen);
  mark_pages(plt, plt_bytes, seen, sizeof seen);
  uint64_t pages = 0;
  for (size_t i = 0; i < sizeof seen; i++)
    pages += seen[i];
  check("loader.pages", pages > 0 && pages <= 7,
        "%llu pages written by the relocations at load (at most 7)", (unsigned long long)pages);
  if (cpc)
    cpc_close(cpc);
  return guest_exit();
}
