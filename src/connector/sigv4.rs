//! AWS Signature Version 4 for the requests the gateway signs itself (ml-commons `aws_sigv4`
//! connectors, an `[opensearch]` cluster on SigV4), through the official `aws-sigv4` signer.
//! The payload hash always goes in `x-amz-content-sha256`: Bedrock's `InvokeModel` and
//! OpenSearch Serverless need it, the other services accept it.

use std::time::SystemTime;

use aws_sigv4::http_request::{
    PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign,
};

/// The headers that sign `method url` with `headers` and `body` for `service` in `region` as
/// `credentials`; the caller adds them to the request.
pub fn headers(
    credentials: aws_credential_types::Credentials,
    region: &str,
    service: &str,
    method: &str,
    url: &url::Url,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Vec<(String, String)>, String> {
    let identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| format!("cannot sign: {e}"))?
        .into();
    let signable = SignableRequest::new(
        method,
        url.as_str(),
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("cannot sign: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("cannot sign: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}
