//! `/openapi/v2`: the minimal OpenAPI v2 document kubectl requires before it uses OpenAPI v3.

/// `Content-Type` to serve [`v2_document`] with (kubectl asks for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
/// but cannot parse that media type in a response, and reads the body as protobuf whatever the type).
pub const V2_CONTENT_TYPE: &str = "application/octet-stream";

/// `GET /openapi/v2`: a minimal OpenAPI v2 document in the protobuf encoding kubectl requires (gnostic's `Document`
/// with only `swagger: "2.0"` and `info`). kubectl finds no schema in it, so it skips client-side validation, computes
/// strategic merge patches from its compiled-in types, and `kubectl explain --output=plaintext-openapiv2` reports the
/// resource as not found; everything else uses OpenAPI v3.
pub fn v2_document() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2];
        // Lengths here are below 128, so a one-byte varint.
        out.push(u8::try_from(bytes.len()).unwrap_or(0));
        out.extend_from_slice(bytes);
        out
    }
    let mut info = field(1, b"Kubernetes");
    info.extend(field(2, b"v1.33.0"));
    let mut doc = field(1, b"2.0");
    doc.extend(field(2, &info));
    doc
}
