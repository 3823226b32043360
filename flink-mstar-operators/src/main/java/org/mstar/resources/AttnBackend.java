package org.mstar.resources;

/** Attention kernels a deployment may pick; AUTO resolves to what this build has. */
public enum AttnBackend { AUTO, FLASHINFER, DENSE, FLASHINFER_MLA, FLEX, XPU_PAGED }
