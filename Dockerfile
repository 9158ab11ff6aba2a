# syntax=docker/dockerfile:1
# One image for every role: `tally router|regional|management|migrate|admin`.
# The binary is static (no cgo) and the runtime image has no shell, no package
# manager and runs as the distroless "nonroot" user (65532); the manifests say
# runAsUser: 65532 too, since the kubelet can check runAsNonRoot only against
# a numeric user.
#
#   docker build -t ghcr.io/tallyhq/tally:v0.19.0 .
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/tally ./cmd/tally

# distroless/static carries CA certificates (webhooks to https targets) and
# tzdata, which is all the binary reads from the filesystem.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tally /usr/local/bin/tally
USER 65532:65532
EXPOSE 8080 8081 8082 8443 9090 9091 9092
ENTRYPOINT ["/usr/local/bin/tally"]
