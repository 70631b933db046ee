//! The PAPI preset names the emulated models map to their own events, each written once: a
//! model's `generics` rows name a preset from here and give only the model's own event (and
//! event mask), as PAPI's per-platform preset tables did. The meanings are PAPI's
//! (`papiStdEventDefs.h`); which event stands for a preset is the model's choice, from its
//! vendor's manual or PAPI's substrate for it.

/// Conditional branch instructions.
pub const BR_CN: &str = "PAPI_br_cn";
/// Branch instructions.
pub const BR_INS: &str = "PAPI_br_ins";
/// Conditional branch instructions mispredicted.
pub const BR_MSP: &str = "PAPI_br_msp";
/// Conditional branch instructions not taken.
pub const BR_NTK: &str = "PAPI_br_ntk";
/// Conditional branch instructions correctly predicted.
pub const BR_PRC: &str = "PAPI_br_prc";
/// Conditional branch instructions taken.
pub const BR_TKN: &str = "PAPI_br_tkn";
/// Requests for exclusive access to a clean cache line.
pub const CA_CLN: &str = "PAPI_ca_cln";
/// Requests for cache line invalidation.
pub const CA_INV: &str = "PAPI_ca_inv";
/// Requests for cache line intervention.
pub const CA_ITV: &str = "PAPI_ca_itv";
/// Requests for exclusive access to a shared cache line.
pub const CA_SHR: &str = "PAPI_ca_shr";
/// Requests for a snoop.
pub const CA_SNP: &str = "PAPI_ca_snp";
/// Failed store conditional instructions.
pub const CSR_FAL: &str = "PAPI_csr_fal";
/// Total store conditional instructions.
pub const CSR_TOT: &str = "PAPI_csr_tot";
/// FP add instructions (FMA pipe).
pub const FMA_INS: &str = "PAPI_fma_ins";
/// FP multiply instructions.
pub const FML_INS: &str = "PAPI_fml_ins";
/// Floating point instructions.
pub const FP_INS: &str = "PAPI_fp_ins";
/// Integer instructions.
pub const INT_INS: &str = "PAPI_int_ins";
/// Level 1 data cache accesses.
pub const L1_DCA: &str = "PAPI_l1_dca";
/// Level 1 data cache misses.
pub const L1_DCM: &str = "PAPI_l1_dcm";
/// Level 1 data cache reads.
pub const L1_DCR: &str = "PAPI_l1_dcr";
/// Level 1 data cache writes.
pub const L1_DCW: &str = "PAPI_l1_dcw";
/// Level 1 instruction cache accesses.
pub const L1_ICA: &str = "PAPI_l1_ica";
/// Level 1 instruction cache hits.
pub const L1_ICH: &str = "PAPI_l1_ich";
/// Level 1 instruction cache misses.
pub const L1_ICM: &str = "PAPI_l1_icm";
/// Level 2 data cache hits.
pub const L2_DCH: &str = "PAPI_l2_dch";
/// Level 2 data cache misses.
pub const L2_DCM: &str = "PAPI_l2_dcm";
/// Level 2 instruction cache hits.
pub const L2_ICH: &str = "PAPI_l2_ich";
/// Level 2 instruction cache misses.
pub const L2_ICM: &str = "PAPI_l2_icm";
/// Level 2 load misses.
pub const L2_LDM: &str = "PAPI_l2_ldm";
/// Level 2 store misses.
pub const L2_STM: &str = "PAPI_l2_stm";
/// Level 2 total cache accesses.
pub const L2_TCA: &str = "PAPI_l2_tca";
/// Level 2 total cache hits.
pub const L2_TCH: &str = "PAPI_l2_tch";
/// Level 2 cache misses.
pub const L2_TCM: &str = "PAPI_l2_tcm";
/// Level 3 cache misses.
pub const L3_TCM: &str = "PAPI_l3_tcm";
/// Load instructions.
pub const LD_INS: &str = "PAPI_ld_ins";
/// Data prefetch cache misses.
pub const PRF_DM: &str = "PAPI_prf_dm";
/// Store instructions.
pub const SR_INS: &str = "PAPI_sr_ins";
/// Data translation lookaside buffer misses.
pub const TLB_DM: &str = "PAPI_tlb_dm";
/// Instruction translation lookaside buffer misses.
pub const TLB_IM: &str = "PAPI_tlb_im";
/// Total translation lookaside buffer misses.
pub const TLB_TL: &str = "PAPI_tlb_tl";
/// Total translation lookaside buffer misses (data and instruction).
pub const TLB_TM: &str = "PAPI_tlb_tm";
/// Total cycles.
pub const TOT_CYC: &str = "PAPI_tot_cyc";
/// Instructions issued.
pub const TOT_IIS: &str = "PAPI_tot_iis";
/// Instructions completed.
pub const TOT_INS: &str = "PAPI_tot_ins";
