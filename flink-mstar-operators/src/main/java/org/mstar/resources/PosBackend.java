package org.mstar.resources;

public enum PosBackend { ROPE }
