# A worker's image with queenctl in it (docs/kubernetes.md): the executable copied from the
# queenctl image, which runs on any glibc-based image that has libstdc++ (Debian, Ubuntu, UBI,
# distroless/cc); not on Alpine (musl). Nothing else from the queenctl image is needed.
FROM registry.example.com/queenctl:0.1.0 AS queenctl

FROM debian:bookworm-slim
COPY --from=queenctl /usr/bin/queenctl /usr/local/bin/
COPY worker reprocess handler /app/
WORKDIR /app
# The uid the manifests run as (runAsUser). queenctl writes no file; its broker and token come
# from the pod's environment (QUEEN_SERVER, QUEEN_TOKEN), the wrapping from the pod's command.
USER 65532
