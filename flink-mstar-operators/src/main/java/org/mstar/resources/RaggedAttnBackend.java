package org.mstar.resources;

public enum RaggedAttnBackend { AUTO, FLASHINFER }
