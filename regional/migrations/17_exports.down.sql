DROP TABLE export_chunks;
DROP TABLE exports;
