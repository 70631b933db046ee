/*
 * <sys/pfcntr.h>: Tru64 UNIX's on-chip performance counter pseudo-device, pfm(7), on Linux
 * (perfcompat). Open "/dev/pfcntr" with one of PCNTOPENONE, PCNTOPENEACH, PCNTOPENALL ORed into
 * the open flags in a program linked with -lpfcntr (or with libpfcntr.so.1 preloaded), and
 * drive it with the ioctl requests below; read(2) returns the PC profile.
 *
 * pfm(7) names the requests, flags, structures and event selectors but gives none of their
 * values or layouts: every numeric value and every structure layout here is perfcompat's own,
 * not Tru64's, so a program must be compiled against this header (binaries built on Tru64 do
 * not run on Linux anyway). Names pfm(7) describes but does not spell are ours too: the EV5
 * requests other than PCNT5RESTART and PCNT5GETCNT, PCNTLOGUSER (pfm(7): "clears the
 * PCB_PME_BIT of the current process"), the structure members, and the suffixes of the
 * PF5_MUXn_* event selectors (pfm(7) gives only the prefixes). See docs/pfm.md and
 * pfcntr.h(3) for what Linux can and cannot provide (kernel profiling is not available).
 *
 * The values are checked against the library by capi/tests/pfm.rs.
 */
#ifndef PERFCOMPAT_SYS_PFCNTR_H
#define PERFCOMPAT_SYS_PFCNTR_H

/* Open modes, ORed into the flags of open(2). None of them means PCNTOPENALL. */
#define PCNTOPENONE  0x10000000 /* the CPU the caller is bound to (else EINVAL) */
#define PCNTOPENEACH 0x20000000 /* every CPU, data per CPU */
#define PCNTOPENALL  0x40000000 /* every CPU, data aggregated */

/* Data items of PCNTSETITEMS (an int, passed by address). */
#define PFM_COUNTERS  0x1
#define PFM_IPL       0x2
#define PFM_PROFILING 0x4

/* ioctl requests (EV4 interface; most serve EV5 too). The argument of each is a pointer.
 * The numbers are Linux's _IO('P', 0x80 + n): no direction or size for tools to decode.
 *
 * The four requests that return an array (PCNTGETCNT, PCNTGETIPLHIS, PCNT5GETCNT,
 * PCNT5GETCNT2) take the address of a pointer to the array, as in pfm(7)'s sample:
 *     struct pfcntrs cntrs[N], *p = cntrs; ioctl(fd, PCNTGETCNT, &p);
 * Tru64's original header made them _IOR('P', n, struct pfcntrs), whose argument is the
 * array itself (ioctl(fd, PCNTGETCNT, &cntrs), as PAPI's Alpha code calls it). The library
 * serves both, told apart by the size in the number: the numbers below and
 * _IOR('P', 0x80 + n, <element> *) are the pointer's form, _IOR('P', 0x80 + n, <element>)
 * the array's. A program written to the original header defines PFCNTR_ORIGINAL_ARGS before
 * including this one, which then gives it the array's numbers; and a device enabled or
 * disabled with PCNTRENABLE/PCNTRDISABLE (names only the original header had) takes the
 * numbers below in the array's form too. */
#define PCNTDISABLE      0x5080UL
#define PCNTENABLE       0x5081UL
#define PCNTSETMUX       0x5082UL
#define PCNTSETITEMS     0x5083UL
#define PCNTLOGALL       0x5084UL
#define PCNTLOGSELECT    0x5085UL
#define PCNTLOGUSER      0x5086UL
#define PCNTCLEARCNT     0x5087UL
#define PCNTGETCNT       0x5088UL
#define PCNTGETRSIZE     0x5089UL
#define PCNTGETIPLHIS    0x508aUL
#define PCNTCALLER       0x508bUL
#define PCNTSETKADDR     0x508cUL
#define PCNTSETKRANGE    0x508dUL
#define PCNTSETUADDR     0x508eUL
#define PCNTSETURANGE    0x508fUL
#define PCNTRENABLE      0x5090UL
#define PCNTRDISABLE     0x5091UL

/* EV5 requests. */
#define PCNT5MUX         0x50a0UL
#define PCNT5FREQ        0x50a1UL
#define PCNT5ENABLE      0x50a2UL
#define PCNT5RESTART     0x50a3UL
#define PCNT5DISABLE     0x50a4UL
#define PCNT5WRITE       0x50a5UL
#define PCNT5CTXT        0x50a6UL
#define PCNT5GETCNT      0x50a7UL
#define PCNT5GETCNT2     0x50a8UL
#define PCNT5READCNTRS   0x50a9UL

/* Linux's _IOR('P', nr, type), spelled out so that the header needs no other header. */
#define PERFCOMPAT_PFCNTR_IOR(nr, type) \
    (0x80000000UL | ((unsigned long)(sizeof(type) & 0x3fff) << 16) | 0x5000UL | (nr))
#ifdef PFCNTR_ORIGINAL_ARGS
#undef PCNTGETCNT
#undef PCNTGETIPLHIS
#undef PCNT5GETCNT
#undef PCNT5GETCNT2
#define PCNTGETCNT       PERFCOMPAT_PFCNTR_IOR(0x88, struct pfcntrs)
#define PCNTGETIPLHIS    PERFCOMPAT_PFCNTR_IOR(0x8a, struct pfipls)
#define PCNT5GETCNT      PERFCOMPAT_PFCNTR_IOR(0xa7, struct pfcntrs_ev5)
#define PCNT5GETCNT2     PERFCOMPAT_PFCNTR_IOR(0xa8, struct pfcntrs_ev5)
#endif

/* PCNTSETMUX: EV4 events and interrupt frequencies. */
struct iccsr {
    unsigned int iccsr_pc0;     /* counter 0: non-zero, interrupt every 2^12 events; 0, 2^16 */
    unsigned int iccsr_pc1;     /* counter 1: non-zero, every 2^8 events; 0, 2^12 */
    unsigned int iccsr_mux0;    /* counter 0's event: PF_ISSUES ... PF_EXTPIN0 */
    unsigned int iccsr_mux1;    /* counter 1's event: PF_DCACHE ... PF_EXTPIN1 */
    unsigned int iccsr_disable; /* bit n disables counter n; 3 is EINVAL */
    unsigned int iccsr_mbz;     /* must be zero */
};

/* EV4 counter 0 events. */
#define PF_ISSUES                  0x0
#define PF_PIPEDRY                 0x1
#define PF_LOADI                   0x2
#define PF_PIPEFROZEN              0x3
#define PF_BRANCHI                 0x4
#define PF_CYCLES                  0x5
#define PF_PALMODE                 0x6
#define PF_NONISSUES               0x7
#define PF_EXTPIN0                 0x8

/* EV4 counter 1 events. */
#define PF_DCACHE                  0x0
#define PF_ICACHE                  0x1
#define PF_DUAL                    0x2
#define PF_BRANCHMISS              0x3
#define PF_FPINST                  0x4
#define PF_INTOPS                  0x5
#define PF_STOREI                  0x6
#define PF_EXTPIN1                 0x7

/* PCNTGETCNT: one element, or one per CPU with PCNTOPENEACH. The counts are interrupts, i.e.
 * events in units of the counter's interrupt frequency. Pass the address of a pointer to the
 * array: struct pfcntrs cntrs[N], *p = cntrs; ioctl(fd, PCNTGETCNT, &p); */
struct pfcntrs {
    unsigned long pf_cntr0;
    unsigned long pf_cntr1;
    unsigned long pf_pcc;       /* nanoseconds since the counters were cleared */
};

/* PCNTGETIPLHIS: 0-5 IPL0-5, 6 unused, 7 idle, 8 user (docs/pfm.md gives Linux's mapping). */
#define PF_NIPL 9
struct pfipls {
    unsigned long pf_ipl[PF_NIPL];
};

/* PCNTSETUADDR, PCNTSETKADDR: [pfa_start, pfa_end). */
struct pfaddr {
    unsigned long pfa_start;
    unsigned long pfa_end;
};

/* PCNTSETURANGE, PCNTSETKRANGE: the range and the stride (instructions of 4 bytes per bucket:
 * 0 or a power of two; 0 is one bucket for the whole range). */
struct pfrange {
    unsigned long pfr_start;
    unsigned long pfr_end;
    unsigned long pfr_stride;
};

/* EV5 event selectors for PCNT5MUX: one per counter, ORed. */
#define PF5_MUX0_CYCLES            0x0
#define PF5_MUX0_ISSUES            0x1

#define PF5_MUX1_PIPEFROZEN        0x0
#define PF5_MUX1_SPLITISS          0x100
#define PF5_MUX1_PIPEDRY           0x200
#define PF5_MUX1_REPLAYTRAP        0x300
#define PF5_MUX1_SINGLEISS         0x400
#define PF5_MUX1_DUALISS           0x500
#define PF5_MUX1_TRIPLEISS         0x600
#define PF5_MUX1_QUADISS           0x700
#define PF5_MUX1_FLOWCHANGE        0x800
#define PF5_MUX1_INTOPS            0x900
#define PF5_MUX1_FPINST            0xa00
#define PF5_MUX1_LOADI             0xb00
#define PF5_MUX1_STOREI            0xc00
#define PF5_MUX1_ICACHE            0xd00
#define PF5_MUX1_DCACHE            0xe00
#define PF5_MUX1_SCACHE            0xf00
#define PF5_MUX1_SCACHEREAD        0x1000
#define PF5_MUX1_SCACHEWRITE       0x1100
#define PF5_MUX1_SCACHEVICTIM      0x1200
#define PF5_MUX1_BCACHE            0x1300
#define PF5_MUX1_BCACHEVICTIM      0x1400
#define PF5_MUX1_SYSREQ            0x1500

#define PF5_MUX2_CYCLES            0xb0000UL
#define PF5_MUX2_SCACHEWRITE       0x120000UL
#define PF5_MUX2_LONGSTALLS        0x0
#define PF5_MUX2_PCMISPR           0x10000UL
#define PF5_MUX2_BRANCHMISS        0x20000UL
#define PF5_MUX2_ICACHEMISS        0x30000UL
#define PF5_MUX2_ITBMISS           0x40000UL
#define PF5_MUX2_DCACHEMISS        0x50000UL
#define PF5_MUX2_DTBMISS           0x60000UL
#define PF5_MUX2_LOADSMERGED       0x70000UL
#define PF5_MUX2_LDUSEREPLAY       0x80000UL
#define PF5_MUX2_WBMAFREPLAY       0x90000UL
#define PF5_MUX2_EXTPIN            0xa0000UL
#define PF5_MUX2_MBSTALL           0xc0000UL
#define PF5_MUX2_LDXL              0xd0000UL
#define PF5_MUX2_SCACHEMISS        0xe0000UL
#define PF5_MUX2_SCACHEREADMISS    0xf0000UL
#define PF5_MUX2_SCACHEWRITEMISS   0x100000UL
#define PF5_MUX2_SCACHESHWRITE     0x110000UL
#define PF5_MUX2_BCACHEMISS        0x130000UL
#define PF5_MUX2_SYSINV            0x140000UL
#define PF5_MUX2_SYSREAD           0x150000UL

/* PCNT5FREQ: one frequency per counter, ORed (0 for a counter leaves it unchanged). */
#define PF5_C0_INT_EVERY_65536     0x1
#define PF5_C0_INT_EVERY_256       0x2
#define PF5_C1_INT_EVERY_65536     0x4
#define PF5_C1_INT_EVERY_256       0x8
#define PF5_C2_INT_EVERY_16384     0x10
#define PF5_C2_INT_EVERY_256       0x20

/* PCNT5CTXT: the modes to count in, ORed. */
#define PF5_CTXT_USER              0x1
#define PF5_CTXT_KERNEL            0x2

/* PCNT5ENABLE, PCNT5RESTART, PCNT5DISABLE, PCNT5WRITE, PCNT5READCNTRS: pass
 * &u.pmctrs_ev5_long with u.pmctrs_ev5_cpu and u.pmctrs_ev5_select set. */
#define PMCTRS_ALL_CPUS (-1L)
#define PF5_SEL_COUNTER_0          0x1
#define PF5_SEL_COUNTER_1          0x2
#define PF5_SEL_COUNTER_2          0x4
union pmctrs_ev5 {
    unsigned long pmctrs_ev5_long;
    __extension__ struct {
        long pmctrs_ev5_cpu;                /* a CPU, or PMCTRS_ALL_CPUS */
        unsigned long pmctrs_ev5_select;    /* PF5_SEL_COUNTER_* */
        unsigned long pmctrs_ev5_ctr[3];    /* PCNT5WRITE: values; PCNT5READCNTRS: read */
    };
};

/* PCNT5GETCNT: interrupts per counter; PCNT5GETCNT2: interrupts shifted left by the counter's
 * width plus the raw counter, i.e. the events. */
struct pfcntrs_ev5 {
    unsigned long pf_cntr0;
    unsigned long pf_cntr1;
    unsigned long pf_cntr2;
    unsigned long pf_pcc;
};

#endif /* PERFCOMPAT_SYS_PFCNTR_H */
