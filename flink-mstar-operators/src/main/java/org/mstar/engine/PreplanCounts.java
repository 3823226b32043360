package org.mstar.engine;

/**
 * What became of an engine's pre-planned decode steps.
 *
 * @param staged   steps planned ahead
 * @param promoted staged steps the next step ran as planned
 * @param dropped  staged steps undone because the next step differed (a request stopped before its length, another
 *                 joined, one was preempted or removed)
 */
public record PreplanCounts(long staged, long promoted, long dropped) {
    public static final PreplanCounts NONE = new PreplanCounts(0, 0, 0);
}
