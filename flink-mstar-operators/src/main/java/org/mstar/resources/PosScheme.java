package org.mstar.resources;

/** SEQUENTIAL: one position per token. BLOCK: every token of a step shares one position. */
public enum PosScheme { SEQUENTIAL, BLOCK }
