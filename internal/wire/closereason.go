package wire

// closeReason is why a connection closed, the reason label of
// coordinatord_connections_closed_total; "" means it stays open. Every reason is a constant
// here: the metrics table of docs/operations.md lists them, and a test holds the two equal.
type closeReason string

const (
	closePeerClosed             closeReason = "peer closed"
	closeIdle                   closeReason = "idle"
	closeBadFrame               closeReason = "bad frame"
	closeTruncatedFrame         closeReason = "truncated frame"
	closeBadRequest             closeReason = "bad request"
	closeResponseTooLarge       closeReason = "response too large"
	closeWriteFailed            closeReason = "write failed"
	closeShutdown               closeReason = "shutdown"
	closeReadError              closeReason = "read error"
	closeUpstreamFailed         closeReason = "upstream failed"
	closeTLSHandshakeFailed     closeReason = "tls handshake failed"
	closePrincipalMappingFailed closeReason = "principal mapping failed"
	closeUnauthenticatedRequest closeReason = "unauthenticated request"
	closeAuthenticationFailed   closeReason = "authentication failed"
)
