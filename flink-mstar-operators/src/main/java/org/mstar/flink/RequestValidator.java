package org.mstar.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.metrics.Counter;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Either;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/**
 * Sits before the keyBy: passes requests that are valid as sent and turns everything else (undecodable records,
 * missing fields, parameters out of range) into 400 error events on {@link #REJECTED}, so bad input never
 * reaches a GPU subtask and never fails the job.
 */
final class RequestValidator extends ProcessFunction<Either<ErrorEvent, GenerateRequest>, GenerateRequest> {
    private static final long serialVersionUID = 1L;

    static final OutputTag<Response> REJECTED = new OutputTag<>("rejected-requests", new AvroTypeInfo<>(Response.class));

    private final RequestConverter converter;

    /** Requests answered with a 400 here. */
    private transient Counter rejected;

    RequestValidator(RequestConverter converter) {
        this.converter = converter;
    }

    @Override
    public void open(OpenContext openContext) {
        rejected = getRuntimeContext().getMetricGroup().addGroup("mstar").counter("requestsRejected");
    }

    @Override
    public void processElement(Either<ErrorEvent, GenerateRequest> in, Context ctx, Collector<GenerateRequest> out) {
        if (in.isLeft()) {
            reject(ctx, new Response(in.left()));
            return;
        }
        GenerateRequest request = in.right();
        try {
            converter.convert(request);
        } catch (RequestValidationException e) {
            reject(ctx, Responses.error(request.getRequestId(), Responses.BAD_REQUEST, e.getMessage()));
            return;
        }
        out.collect(request);
    }

    private void reject(Context ctx, Response error) {
        rejected.inc();
        ctx.output(REJECTED, error);
    }
}
