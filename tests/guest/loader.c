/* What the dynamic loader has to do for libperfcompat.so.1 (issue 48, loading the library),
 * read from the library as this process loaded it (its dynamic section, through
 * dl_iterate_phdr):
 *   constructors   at most 4 (.init_array): the outline atomics' flag (capi/link/
 *                  lse_atomics.c), std's argument capture, crtbegin's frame_dummy and the
 *                  preload constructor (capi/src/preload.rs); the archive's __init_cpu_features
 *                  (a dozen trapped ID-register reads at every load) is not linked in. */
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

int main(void) {
  /* A call into the library, so that the link keeps it. */
  cpc_t *cpc = cpc_open(CPC_VER_CURRENT);
  struct found f = {0};
  dl_iterate_phdr(find, &f);
  check("loader.found", f.dyn != NULL, "the dynamic section of libperfcompat.so.1 %s",
        f.dyn ? "found" : "not among the loaded objects");
  if (!f.dyn)
    return guest_exit();
  uint64_t init_bytes = 0;
  for (const ElfW(Dyn) *d = f.dyn; d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_INIT_ARRAYSZ)
      init_bytes = d->d_un.d_val;
  uint64_t ctors = init_bytes / sizeof(void *);
  check("loader.constructors", ctors <= 4,
        "%llu constructors in .init_array (at most 4: no __init_cpu_features)",
        (unsigned long long)ctors);
  if (cpc)
    cpc_close(cpc);
  return guest_exit();
}
