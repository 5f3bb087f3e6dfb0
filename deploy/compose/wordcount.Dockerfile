# The Kafka Streams 4.4 word count of test/e2e (the application `make e2e` runs), as an image.
# Build context: test/e2e/streamsapp.
FROM maven:3-eclipse-temurin-21 AS build
WORKDIR /app
COPY pom.xml .
RUN mvn -B -q dependency:copy-dependencies -Dlib.dir=/app/lib
COPY src src
RUN javac -nowarn -d /app/classes -cp '/app/lib/*' src/*.java

FROM eclipse-temurin:21-jre
COPY --from=build /app/classes /app/classes
COPY --from=build /app/lib /app/lib
# Arguments: bootstrap, application id, input topic, output topic, group protocol, state dir.
ENTRYPOINT ["java", "-Xmx256m", "-cp", "/app/classes:/app/lib/*", "WordCount"]
