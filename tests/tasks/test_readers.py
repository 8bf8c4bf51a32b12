"""Task readers: the GLUE layouts as GLUE ships them, JSONL, CoNLL, SWAG, SQuAD, and bad input that
fails with the file and line."""

import json
import os

import pytest

from keras_bert.tasks.ner.conll import read_conll, write_conll
from keras_bert.tasks.classification.glue import read_glue
from keras_bert.tasks.classification.jsonl import read_jsonl
from keras_bert.tasks.multiple_choice.reader import read_multiple_choice
from keras_bert.tasks.squad.reader import read_squad
from keras_bert.errors import DataError


def write(tmp_path, name, text):
    path = os.path.join(tmp_path, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


GLUE_FILES = {
    # task: (file text, expected (text, text_pair, label) of the first row)
    "cola": ("gj04\t1\t\tOur friends won't buy this analysis.\n"
             "gj04\t0\t*\tThey drank the pub.\n",
             ("Our friends won't buy this analysis.", None, "1")),
    "sst-2": ("sentence\tlabel\nit 's a charming and \"often\" affecting journey . \t1\n",
              ("it 's a charming and \"often\" affecting journey . ", None, "1")),
    "mrpc": ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
             "1\t702876\t702977\tAmrozi accused his brother .\tReferring to him , Amrozi .\n",
             ("Amrozi accused his brother .", "Referring to him , Amrozi .", "1")),
    "sts-b": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
              "\tscore\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking "
              "off.\tAn air plane is taking off.\t5.000\n",
              ("A plane is taking off.", "An air plane is taking off.", 5.0)),
    "qqp": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
            "133273\t213221\t213222\tHow is the life?\tHow is life?\t0\n",
            ("How is the life?", "How is life?", "0")),
    "mnli": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
             "0\t31193\t31193n\tgovernment\t( ( C ) )\t( ( P ) )\t(ROOT)\t(ROOT)\t"
             "Conceptually cream skimming has two dimensions.\tProduct and geography are what "
             "make it work.\tneutral\tneutral\n",
             ("Conceptually cream skimming has two dimensions.",
              "Product and geography are what make it work.", "neutral")),
    "qnli": ("index\tquestion\tsentence\tlabel\n0\tWhat came into force?\tThe law came into "
             "force.\tentailment\n",
             ("What came into force?", "The law came into force.", "entailment")),
    "rte": ("index\tsentence1\tsentence2\tlabel\n0\tNo weapons were found.\tWeapons were found."
            "\tnot_entailment\n",
            ("No weapons were found.", "Weapons were found.", "not_entailment")),
    "wnli": ("index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin.\tI stuck the pin.\t1\n",
             ("I stuck a pin.", "I stuck the pin.", "1")),
}


@pytest.mark.parametrize("task", sorted(GLUE_FILES))
def test_glue_layouts(tmp_path, task):
    text, expected = GLUE_FILES[task]
    example = read_glue(write(tmp_path, "train.tsv", text), task)[0]
    assert (example.text, example.text_pair, example.label) == expected
    assert example.line == (1 if task == "cola" else 2)


def test_glue_test_files_without_labels(tmp_path):
    path = write(tmp_path, "test.tsv", "index\tsentence\n0\tit 's a charming journey .\n")
    assert read_glue(path, "sst-2", with_labels=False)[0].label is None
    assert read_glue(path, "cola", with_labels=False)[0].text == "it 's a charming journey ."


def test_generic_csv_with_quotes_and_multiline_rows(tmp_path):
    path = write(tmp_path, "train.csv",
                 'text,text_pair,label\n"Hello, world",x,pos\n"two\nlines",y,neg\nlast,z,pos\n')
    examples = read_glue(path)
    assert [(e.text, e.label, e.line) for e in examples] == [
        ("Hello, world", "pos", 2), ("two\nlines", "neg", 3), ("last", "pos", 5)]


def test_glue_bad_input_names_file_and_line(tmp_path):
    missing = write(tmp_path, "dev.tsv", "index\tquestion\tsentence\n0\tWhy?\tBecause.\n")
    with pytest.raises(DataError, match=r"dev\.tsv:1: missing label column 'label'"):
        read_glue(missing, "qnli")
    unknown = write(tmp_path, "dev2.tsv", "sentence1\tsentence2\tlabel\na\tb\tentailment\n"
                                          "c\td\tcontradiction\n")
    with pytest.raises(DataError, match=r"dev2\.tsv:3: unknown label 'contradiction'"):
        read_glue(unknown, "rte")
    empty = write(tmp_path, "train.tsv", "sentence\tlabel\ngood\t1\n  \t0\n")
    with pytest.raises(DataError, match=r"train\.tsv:3: field 'sentence' is empty"):
        read_glue(empty, "sst-2")
    short = write(tmp_path, "short.tsv", "sentence\tlabel\ngood\n")
    with pytest.raises(DataError, match=r"short\.tsv:2: expected at least 2 fields"):
        read_glue(short, "sst-2")


# Amazon Fine Food reviews as a user exports them: the text is not in a column named "text", and
# quoted fields hold commas, doubled quotes and newlines.
FINE_FOODS = ('product,review,score\n'
              'B001E4KFG0,"Good quality dog food, my Labrador is finicky and she likes it.",5\n'
              'B00813GRG4,"Product arrived labeled as ""Jumbo Salted Peanuts""\n'
              '...the peanuts were actually small sized unsalted.",1\n'
              'B000LQOCH0,plain text,4\n')


def test_generic_csv_columns_named_by_the_caller(tmp_path):
    path = write(tmp_path, "reviews.csv", FINE_FOODS)
    examples = read_glue(path, text_column="review", label_column="score")
    assert [(e.text, e.text_pair, e.label, e.line) for e in examples] == [
        ("Good quality dog food, my Labrador is finicky and she likes it.", None, "5", 2),
        ('Product arrived labeled as "Jumbo Salted Peanuts"\n...the peanuts were actually '
         'small sized unsalted.', None, "1", 3),
        ("plain text", None, "4", 5)]
    pair = read_glue(path, text_column="product", text_pair_column="review",
                     label_column="score")[0]
    assert (pair.text, pair.text_pair) == ("B001E4KFG0", examples[0].text)
    # A test file without the label column reads with the same names.
    test = write(tmp_path, "test.csv", 'review,product\n"Tasty, cheap",B001\n')
    assert read_glue(test, text_column="review", label_column="score",
                     with_labels=False)[0].text == "Tasty, cheap"


def test_the_dialect_is_given_or_follows_the_extension(tmp_path):
    tsv = write(tmp_path, "reviews.txt", 'text\tlabel\n"quoted, as is"\tpos\n')
    assert read_glue(tsv)[0].text == '"quoted, as is"'  # TSV: no quoting, as GLUE's files
    csv_text = write(tmp_path, "reviews.data", 'text,label\n"one, two",pos\n')
    assert read_glue(csv_text, dialect="csv")[0].text == "one, two"
    with pytest.raises(DataError, match=r"reviews\.data:1: missing text column 'text'; the "
                                        r"header has 'text,label'"):
        read_glue(csv_text)


def test_named_columns_that_are_missing_or_used_twice(tmp_path):
    path = write(tmp_path, "reviews.csv", FINE_FOODS)
    with pytest.raises(DataError, match=r"reviews\.csv:1: missing text column 'text'; the "
                                        r"header has 'product', 'review', 'score'$"):
        read_glue(path, label_column="score")
    with pytest.raises(DataError, match=r"reviews\.csv:1: missing label column 'stars'; the "
                                        r"header has 'product', 'review', 'score'$"):
        read_glue(path, text_column="review", label_column="stars")
    # The generic text_pair column may be absent; one named by the caller may not.
    with pytest.raises(DataError, match=r"reviews\.csv:1: missing text_pair column 'summary'"):
        read_glue(path, text_column="review", text_pair_column="summary",
                  label_column="score")
    with pytest.raises(ValueError, match=r"^text_column and label_column both name 'score'; "
                                         r"a column is read for one role only$"):
        read_glue(path, text_column="score", label_column="score")
    with pytest.raises(ValueError, match=r"label_column and feature column 'score' both name"):
        read_glue(path, text_column="review", label_column="score", feature_columns=["score"])
    with pytest.raises(DataError, match=r"train\.tsv: the file has no header, so the text "
                                        r"column 'sentence' cannot be found by name"):
        read_glue(write(tmp_path, "train.tsv", GLUE_FILES["cola"][0]), "cola",
                  text_column="sentence")


def test_kept_columns_come_as_they_are_or_fail_naming_the_header(tmp_path):
    path = write(tmp_path, "test.tsv", "id\ttext\tlabel\n 007 \tfine\t1\n")
    assert [e.kept for e in read_glue(path, with_labels=False, keep_columns=["id", "label"])] \
        == [{"id": " 007 ", "label": "1"}]
    with pytest.raises(DataError, match=r"test\.tsv:1: missing kept column 'row'; the header "
                                        r"has 'id', 'text', 'label'$"):
        read_glue(path, keep_columns=["row"])


def test_jsonl_keys_named_by_the_caller(tmp_path):
    path = write(tmp_path, "reviews.jsonl",
                 '{"product": "B001", "review": "Tasty, \\"cheap\\"", "score": 5}\n'
                 '{"product": "B002", "review": "Stale", "score": 1, "summary": "no"}\n')
    examples = read_jsonl(path, text_key="review", label_key="score")
    assert [(e.text, e.text_pair, e.label) for e in examples] == [
        ('Tasty, "cheap"', None, 5), ("Stale", None, 1)]
    pairs = read_jsonl(path, text_key="review", text_pair_key="summary", label_key="score")
    assert [e.text_pair for e in pairs] == [None, "no"]
    with pytest.raises(DataError, match=r"reviews\.jsonl:1: missing text field 'text'; the "
                                        r"line has 'product', 'review', 'score'$"):
        read_jsonl(path, label_key="score")
    with pytest.raises(DataError, match=r"reviews\.jsonl:1: missing label field 'stars'"):
        read_jsonl(path, text_key="review", label_key="stars")
    with pytest.raises(DataError, match=r"reviews\.jsonl: no line has the text pair field "
                                        r"'title'"):
        read_jsonl(path, text_key="review", text_pair_key="title", label_key="score")
    with pytest.raises(ValueError, match=r"^text_key and label_key both name 'review'"):
        read_jsonl(path, text_key="review", label_key="review")
    # Kept keys come as their JSON values, None on a line without one.
    kept = read_jsonl(path, text_key="review", label_key="score", keep_keys=["product", "summary"])
    assert [e.kept for e in kept] == [{"product": "B001", "summary": None},
                                      {"product": "B002", "summary": "no"}]
    with pytest.raises(DataError, match=r"reviews\.jsonl: no line has the kept key 'id'; the "
                                        r"lines have 'product', 'review', 'score', 'summary'$"):
        read_jsonl(path, text_key="review", label_key="score", keep_keys=["id"])


def test_jsonl(tmp_path):
    path = write(tmp_path, "train.jsonl", '{"text": "a", "text_pair": "b", "label": 3}\n\n'
                                          '{"text": "c", "label": 2.5}\n')
    examples = read_jsonl(path)
    assert [(e.text, e.text_pair, e.label, e.line) for e in examples] == [
        ("a", "b", 3, 1), ("c", None, 2.5, 3)]
    bad = write(tmp_path, "bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: missing label field 'label'"):
        read_jsonl(bad)
    broken = write(tmp_path, "broken.jsonl", '{"text": "a", "label": 1}\n{"text": \n')
    with pytest.raises(DataError, match=r"broken\.jsonl:2: invalid JSON"):
        read_jsonl(broken)
    empty = write(tmp_path, "empty.jsonl", '{"text": "", "label": 1}\n')
    with pytest.raises(DataError, match=r"empty\.jsonl:1: field 'text' is empty"):
        read_jsonl(empty)


def test_conll_reader_and_writer(tmp_path):
    path = write(tmp_path, "train.txt", "-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\n"
                                        "rejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n")
    sentences = read_conll(path)
    assert [(s.words, s.tags, s.line) for s in sentences] == [
        (["EU", "rejects"], ["I-ORG", "O"], 3), (["Peter"], ["B-PER"], 6)]
    out = os.path.join(tmp_path, "pred.conll")
    write_conll(out, sentences, [["B-ORG", "O"], ["B-PER"]])
    assert open(out).read() == "EU I-ORG B-ORG\nrejects O O\n\nPeter B-PER B-PER\n\n"
    bad = write(tmp_path, "bad.txt", "EU B-ORG\nrejects\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: expected a word and a tag"):
        read_conll(bad)
    wrong = write(tmp_path, "wrong.txt", "EU NNP\n")
    with pytest.raises(DataError, match=r"wrong\.txt:1: tag 'NNP' is not 'O'"):
        read_conll(wrong)


def test_swag_and_jsonl_multiple_choice(tmp_path):
    header = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2," \
             "ending3,label\n"
    path = write(tmp_path, "train.csv", header + '0,v,1,x,"He sat, tired.",He,gold,sleeps.,'
                                                 'eats.,runs.,flies.,2\n')
    example = read_multiple_choice(path)[0]
    assert example.context == "He sat, tired."
    assert example.choices == ["He sleeps.", "He eats.", "He runs.", "He flies."]
    assert example.label == 2
    bad = write(tmp_path, "bad.csv", header + "0,v,1,x,a,b,gold,c,d,e,f,7\n")
    with pytest.raises(DataError, match=r"bad\.csv:2: label '7' is not a choice index"):
        read_multiple_choice(bad)
    uneven = write(tmp_path, "dev.jsonl",
                   '{"context": "a", "choices": ["b", "c"], "label": 0}\n'
                   '{"context": "d", "choices": ["e", "f", "g"], "label": 1}\n')
    with pytest.raises(DataError, match=r"dev\.jsonl:2: 3 choices, but the first example has 2"):
        read_multiple_choice(uneven)


def squad_file(tmp_path, qas, context="Ada Lovelace wrote the first program in 1843."):
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}
    return write(tmp_path, "squad.json", json.dumps(data, indent=1))


def test_squad_reader(tmp_path):
    path = squad_file(tmp_path, [
        {"id": "q1", "question": "Who?", "answers": [{"text": "Ada Lovelace", "answer_start": 0},
                                                     {"text": "Lovelace", "answer_start": 4}]},
        {"id": "q2", "question": "When did Bob?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "1843", "answer_start": 40}]}])
    first, second = read_squad(path)
    assert [a.text for a in first.answers] == ["Ada Lovelace", "Lovelace"]
    assert second.is_impossible and second.answers == ()
    assert open(path).read().splitlines()[second.line - 1].strip().startswith('"id": "q2"')


def test_squad_answer_not_in_context_names_file_and_line(tmp_path):
    path = squad_file(tmp_path, [
        {"id": "ok", "question": "Who?", "answers": [{"text": "Ada", "answer_start": 0}]},
        {"id": "bad", "question": "When?", "answers": [{"text": "1843", "answer_start": 30}]}])
    line = next(i for i, text in enumerate(open(path).read().splitlines(), start=1)
                if '"bad"' in text)
    with pytest.raises(DataError, match=rf"squad\.json:{line}: question 'bad': answer '1843' is "
                                        r"not in its context at answer_start=30 .* the text "
                                        r"occurs at character 40"):
        read_squad(path)
    no_answer = squad_file(tmp_path, [{"id": "x", "question": "Who?", "answers": []}])
    with pytest.raises(DataError, match="has no answers and is not marked is_impossible"):
        read_squad(no_answer)
