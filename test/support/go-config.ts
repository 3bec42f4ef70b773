/** The config file as the Go queenctl writes it: BROKER-FACTS.md's example, byte for byte. */
export const GO_EXAMPLE = `current-context: prod
contexts:
  - name: prod
    server: https://queen.prod.internal:6632
    token-ref: keychain://prod     # or: env | file:///abs/path | literal:<token>
    insecure: false
  - name: local
    server: http://localhost:6632
`;
