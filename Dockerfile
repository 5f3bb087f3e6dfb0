# Static, non-root coordinatord image with its data on a volume.
#   docker build -t coordinatord .
#   docker run -p 9092:9092 -p 9644:9644 -v coordinatord-data:/var/lib/coordinatord coordinatord
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/coordinatord ./cmd/coordinatord

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coordinatord /usr/local/bin/coordinatord
COPY configs/coordinatord.properties /etc/coordinatord/coordinatord.properties
VOLUME /var/lib/coordinatord
EXPOSE 9092 9644
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/coordinatord", "serve", "--config", "/etc/coordinatord/coordinatord.properties", \
  "--set", "log.dirs=/var/lib/coordinatord", \
  "--set", "listeners=PLAINTEXT://0.0.0.0:9092", \
  "--set", "admin.listener=0.0.0.0:9644"]
# advertised.listeners must name an address clients can reach, e.g.
#   docker run ... coordinatord --set advertised.listeners=PLAINTEXT://localhost:9092
CMD ["--set", "advertised.listeners=PLAINTEXT://localhost:9092"]
