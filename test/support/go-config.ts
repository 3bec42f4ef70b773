/** The config file as the Go queenctl writes it: the example of docs/cli-contract.md#config-file, byte for byte. */
export const GO_EXAMPLE = `current-context: prod
contexts:
  - name: prod
    server: https://queen.prod.internal:6632
    token-ref: keychain://prod     # or: env | file:///abs/path | literal:<token>
    insecure: false
  - name: local
    server: http://localhost:6632
`;
