package codec

func setAVX(on bool) { useAVX = on }
