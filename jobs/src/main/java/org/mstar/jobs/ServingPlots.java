package org.mstar.jobs;

import java.awt.Color;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.ToDoubleFunction;
import org.jfree.chart.ChartFactory;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.PlotOrientation;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * The serving benchmark's pictures, drawn from its rows: output tokens/s against the number of requests in flight
 * (one line per side), and latency percentiles against the request rate (TTFT and TPOT, p50 and p99, per side).
 */
final class ServingPlots {
    private static final int WIDTH = 900;
    private static final int HEIGHT = 560;

    private ServingPlots() {}

    /** @return the files written (none when the rows have no concurrency or rate runs) */
    static List<Path> draw(List<ServingResult> rows, Path dir, String title) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<ServingResult> byConcurrency = rows.stream().filter(r -> r.mode().equals("concurrency")).toList();
        List<ServingResult> byRate = rows.stream().filter(r -> r.mode().equals("rate")).toList();
        List<Path> written = new ArrayList<>();
        if (!byConcurrency.isEmpty()) {
            XYSeriesCollection data = new XYSeriesCollection();
            for (String side : List.of("engine", "flink")) {
                add(data, side + " output tok/s", byConcurrency, side, r -> r.concurrency(), ServingResult::outputTokS);
            }
            written.add(save(ChartFactory.createXYLineChart(title + ": throughput against concurrency",
                    "requests in flight", "output tokens/s", data, PlotOrientation.VERTICAL, true, false, false),
                    dir.resolve("throughput-vs-concurrency.png")));
        }
        if (!byRate.isEmpty()) {
            XYSeriesCollection data = new XYSeriesCollection();
            for (String side : List.of("engine", "flink")) {
                add(data, side + " TTFT p50", byRate, side, ServingResult::rate, r -> r.ttftMs().p50());
                add(data, side + " TTFT p99", byRate, side, ServingResult::rate, r -> r.ttftMs().p99());
                add(data, side + " TPOT p50", byRate, side, ServingResult::rate, r -> r.tpotMs().p50());
                add(data, side + " TPOT p99", byRate, side, ServingResult::rate, r -> r.tpotMs().p99());
            }
            written.add(save(ChartFactory.createXYLineChart(title + ": latency against request rate",
                    "requests per second (Poisson)", "milliseconds", data, PlotOrientation.VERTICAL, true, false,
                    false), dir.resolve("latency-vs-rate.png")));
        }
        return written;
    }

    private static void add(XYSeriesCollection data, String name, List<ServingResult> rows, String side,
            ToDoubleFunction<ServingResult> x, ToDoubleFunction<ServingResult> y) {
        XYSeries series = new XYSeries(name);
        rows.stream().filter(r -> r.side().equals(side)).forEach(r -> series.add(x.applyAsDouble(r), y.applyAsDouble(r)));
        if (!series.isEmpty()) {
            data.addSeries(series);
        }
    }

    private static Path save(JFreeChart chart, Path file) throws IOException {
        XYPlot plot = chart.getXYPlot();
        plot.setRenderer(new XYLineAndShapeRenderer(true, true));
        ((NumberAxis) plot.getDomainAxis()).setAutoRangeIncludesZero(true);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        ChartUtils.saveChartAsPNG(file.toFile(), chart, WIDTH, HEIGHT);
        return file;
    }
}
