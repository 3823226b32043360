package org.mstar.engine;

import java.util.Arrays;

/** A growable list of ints without boxing, for token ids. */
final class IntArrayList {
    private int[] data;
    private int size;

    IntArrayList(int capacity) {
        data = new int[Math.max(4, capacity)];
    }

    IntArrayList(int[] initial) {
        data = Arrays.copyOf(initial, Math.max(4, initial.length));
        size = initial.length;
    }

    void add(int v) {
        if (size == data.length) {
            data = Arrays.copyOf(data, data.length * 2);
        }
        data[size++] = v;
    }

    int get(int i) {
        if (i >= size) {
            throw new IndexOutOfBoundsException(i + " >= " + size);
        }
        return data[i];
    }

    int size() {
        return size;
    }

    int last() {
        return data[size - 1];
    }

    int[] toArray() {
        return Arrays.copyOf(data, size);
    }
}
