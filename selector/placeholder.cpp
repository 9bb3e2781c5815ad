namespace seqpoint {}
