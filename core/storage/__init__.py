"""Where bytes come from: files, and objects in object storage (s3://, https://) read by
ranged GETs — URLs, the AWS configuration, object facts, listing, and the ranged reader
(N connections × part size into the caller's memory, retried, checked, recorded)."""
