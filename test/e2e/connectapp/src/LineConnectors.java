import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.file.FileStreamSinkConnector;
import org.apache.kafka.connect.file.FileStreamSinkTask;
import org.apache.kafka.connect.file.FileStreamSourceConnector;
import org.apache.kafka.connect.file.FileStreamSourceTask;

// Kafka's file connectors under names of their own. Maven Central has no connect-file 4.4.0, and
// the 4.3 jar's version() calls a kafka-clients class that 4.4 moved, so every REST call that
// validates a config fails with NoClassDefFoundError. Only version() is replaced; reading and
// writing the files is Kafka's code.
public final class LineConnectors {
    private LineConnectors() {}

    public static final class Source extends FileStreamSourceConnector {
        @Override public String version() { return "4.3.0"; }
        @Override public Class<? extends Task> taskClass() { return SourceTask.class; }
    }

    public static final class SourceTask extends FileStreamSourceTask {
        @Override public String version() { return "4.3.0"; }
    }

    public static final class Sink extends FileStreamSinkConnector {
        @Override public String version() { return "4.3.0"; }
        @Override public Class<? extends Task> taskClass() { return SinkTask.class; }
    }

    public static final class SinkTask extends FileStreamSinkTask {
        @Override public String version() { return "4.3.0"; }
    }
}
