package org.mstar.resources;

/** How a KV page stores a token: per-head K and V (NHD), or a compressed latent (MLA). */
public enum KVLayout { NHD, MLA }
