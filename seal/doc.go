// Package seal encrypts small secrets at rest (subscription signing
// secrets) with AES-256-GCM under a key ring: the first key encrypts, every
// key decrypts, so keys can be rotated without a flag day.
//
// A sealed value is self-describing text, safe in any TEXT column:
//
//	enc:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>
//
// The key id is 8 hex digits of a SHA-256 of the key (never the key), so a
// reader knows which key sealed a value and can say so when it lacks it.
// Values without the "enc:" prefix are plain text, as stored before
// encryption was enabled; Open returns them unchanged, so turning
// encryption on needs no migration.
//
// Every value is bound to its place with AES-GCM additional data (for a
// subscription secret, the subscription id): a ciphertext copied to another
// row does not open. Nonces are 96 random bits per Seal; at the volumes a
// secrets table sees (far below 2^32 seals per key) random nonces are safe.
//
// The cryptography is Go's crypto/aes and crypto/cipher; nothing here is
// hand-rolled beyond the value format.
package seal
