package rfdetr

// coco91 names the 91 class logits by COCO category id; the 11 ids COCO
// never assigned are "N/A" (docs/rfdetr.md, "Labels"). Used for
// any id config.json's id2label does not name.
var coco91 = [NumClasses]string{
	"N/A", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
	"traffic light", "fire hydrant", "N/A", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse",
	"sheep", "cow", "elephant", "bear", "zebra", "giraffe", "N/A", "backpack", "umbrella", "N/A",
	"N/A", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat",
	"baseball glove", "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork", "knife",
	"spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza",
	"donut", "cake", "chair", "couch", "potted plant", "bed", "N/A", "dining table", "N/A", "N/A",
	"toilet", "N/A", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone", "microwave", "oven",
	"toaster", "sink", "refrigerator", "N/A", "book", "clock", "vase", "scissors", "teddy bear", "hair drier",
	"toothbrush",
}

// Labels returns the name of every class id: config.json's id2label where
// it names the id, the COCO-91 table otherwise.
func Labels(id2label map[int]string) [NumClasses]string {
	out := coco91
	for id, name := range id2label {
		if id >= 0 && id < NumClasses && name != "" {
			out[id] = name
		}
	}
	return out
}
