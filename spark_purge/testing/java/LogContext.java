// A compatibility shim for the tiered-storage test broker (spark_purge.testing.cluster, tiered=True).
// Kafka's LocalTieredStorage is published only in the 4.3.1 storage test jar; it builds its
// logger with org.apache.kafka.common.utils.LogContext, which Kafka 4.4 moved to
// org.apache.kafka.common.utils.internals. This class, on the plugin class path next to the
// 4.3.1 jar, gives the old name the 4.4 behaviour; it is the only class the plugin lacks.
package org.apache.kafka.common.utils;

public class LogContext extends org.apache.kafka.common.utils.internals.LogContext {
    public LogContext(String logPrefix) {
        super(logPrefix);
    }

    public LogContext() {
        super();
    }
}
