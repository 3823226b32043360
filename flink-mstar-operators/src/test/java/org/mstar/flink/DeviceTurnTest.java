package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.flink.DeviceTurn.Precedence;

/**
 * The order in which waiting callers get a device's turn: decode calls before the others, each kind in arrival
 * order, and a waiting other caller after at most {@link DeviceTurn#DECODE_TURNS_BEFORE_OTHERS} decode turns.
 */
class DeviceTurnTest {
    private static CpuDevice cpu;

    @BeforeAll
    static void open() {
        cpu = new CpuDevice(1);
    }

    @AfterAll
    static void close() {
        cpu.close();
    }

    /**
     * Holds the turn on a thread of its own while callers line up in the given order (each waiting before the next
     * starts; a name starting with 'd' calls with decode precedence), then lets go; returns the order they ran in.
     */
    private static List<String> order(List<String> names) throws Exception {
        DeviceTurn turn = new DeviceTurn(cpu);
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        Thread holder = new Thread(() -> turn.run(() -> {
            held.countDown();
            awaitUninterruptibly(letGo);
        }));
        holder.start();
        held.await();
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        List<Thread> callers = new ArrayList<>();
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            Precedence precedence = name.startsWith("d") ? Precedence.DECODE : Precedence.OTHER;
            Thread t = new Thread(() -> turn.call(precedence, () -> ran.add(name)));
            callers.add(t);
            t.start();
            while (turn.waiting() < i + 1) {
                Thread.onSpinWait(); // the next caller must line up behind this one
            }
        }
        letGo.countDown();
        holder.join();
        for (Thread t : callers) {
            t.join();
        }
        return ran;
    }

    private static void awaitUninterruptibly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void waitingDecodeCallsGoBeforeOtherCallsThatAskedFirst() throws Exception {
        assertThat(order(List.of("p1", "d1", "p2", "d2", "d3"))).containsExactly("d1", "d2", "d3", "p1", "p2");
    }

    @Test
    void anOtherCallGoesAfterAtMostItsShareOfDecodeTurns() throws Exception {
        List<String> names = new ArrayList<>(List.of("p"));
        for (int i = 0; i < DeviceTurn.DECODE_TURNS_BEFORE_OTHERS + 2; i++) {
            names.add("d" + i);
        }
        List<String> expected = new ArrayList<>(names.subList(1, 1 + DeviceTurn.DECODE_TURNS_BEFORE_OTHERS));
        expected.add("p");
        expected.addAll(names.subList(1 + DeviceTurn.DECODE_TURNS_BEFORE_OTHERS, names.size()));
        assertThat(order(names)).containsExactlyElementsOf(expected);
    }

    @Test
    void aCallInsideACallKeepsTheTurn() {
        DeviceTurn turn = new DeviceTurn(cpu);
        assertThat(turn.call(Precedence.DECODE, () -> turn.call(() -> 7))).isEqualTo(7);
        assertThat(turn.waiting()).isZero();
    }
}
