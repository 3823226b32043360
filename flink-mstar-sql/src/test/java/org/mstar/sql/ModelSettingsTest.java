package org.mstar.sql;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.junit.jupiter.api.Test;

class ModelSettingsTest {
    private static final ModelColumns PROMPT_TO_TEXT = new ModelColumns(0, -1, List.of(ModelColumns.Output.TEXT));

    @Test
    void ignoreEosReachesEveryRowsRequest() {
        GenericRowData row = GenericRowData.of(StringData.fromString("Flink is"));
        assertThat(new RowConverter(TinyModel.settings(TinyModel.options("ignore-eos", "true")), PROMPT_TO_TEXT)
                .request("0", row).ignoreEos()).isTrue();
        assertThat(new RowConverter(TinyModel.settings(TinyModel.options()), PROMPT_TO_TEXT).request("0", row)
                .ignoreEos()).isFalse();
    }
}
