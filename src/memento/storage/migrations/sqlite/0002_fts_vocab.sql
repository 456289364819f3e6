-- Document frequencies of full-text terms, used to drop near-universal query terms.
CREATE VIRTUAL TABLE fragments_fts_vocab USING fts5vocab(fragments_fts, 'row');
