module github.com/ptscope/ptscope

go 1.26.8

require (
	codeberg.org/go-fonts/liberation v0.5.0
	github.com/goccy/go-json v0.12.0
	github.com/google/pprof v0.0.0-20261016150608-1facf8f91b50
	github.com/klauspost/compress v1.20.3
	github.com/parquet-go/parquet-go v0.32.0
	github.com/ulikunitz/xz v0.5.17
	golang.org/x/image v0.30.0
)

require (
	github.com/andybalholm/brotli v1.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/parquet-go/bitpack v1.0.0 // indirect
	github.com/parquet-go/jsonlite v1.0.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.21 // indirect
	github.com/twpayne/go-geom v1.6.1 // indirect
	golang.org/x/sys v0.38.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	google.golang.org/protobuf v1.34.2 // indirect
)
